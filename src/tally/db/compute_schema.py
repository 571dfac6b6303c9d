"""Tables of the lab cloud (SQLAlchemy Core): compute hosts (a service and its compute
node in one row), flavors, servers and migrations, and the identity's signing key.

They share `base.metadata` with Placement's tables, so Alembic sees them (migration
0002). The compute code reads and writes only these tables (and loads no other: this
module imports nothing of `schema`); Placement's are reached over its API, never here.
"""

from __future__ import annotations

import sqlalchemy as sa

from tally.db.base import metadata, timestamps

compute_hosts = sa.Table(
    "compute_hosts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),  # the service's id
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("provider_uuid", sa.String(36), nullable=False, unique=True),  # compute node
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("disk_gb", sa.Integer, nullable=False),
    sa.Column("cpu_allocation_ratio", sa.Float, nullable=False),
    sa.Column("ram_allocation_ratio", sa.Float, nullable=False),
    sa.Column("disk_allocation_ratio", sa.Float, nullable=False),
    sa.Column("reserved_vcpus", sa.Integer, nullable=False),
    sa.Column("reserved_memory_mb", sa.Integer, nullable=False),
    sa.Column("reserved_disk_gb", sa.Integer, nullable=False),
    sa.Column("disabled", sa.Boolean, nullable=False),
    sa.Column("disabled_reason", sa.String(255), nullable=True),
    sa.Column("forced_down", sa.Boolean, nullable=False),
    sa.Column("host_ip", sa.String(64), nullable=False),
    sa.Column("reported_at", sa.DateTime, nullable=True),  # last resource tracker run
    *timestamps(),
)

compute_flavors = sa.Table(
    "compute_flavors",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("flavorid", sa.String(255), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("root_gb", sa.Integer, nullable=False),
    sa.Column("ephemeral_gb", sa.Integer, nullable=False),
    sa.Column("swap", sa.Integer, nullable=False),
    sa.Column("rxtx_factor", sa.Float, nullable=False),
    sa.Column("is_public", sa.Boolean, nullable=False),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("extra_specs", sa.Text, nullable=False),  # JSON object
    *timestamps(),
)

compute_servers = sa.Table(
    "compute_servers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("project_id", sa.String(255), nullable=False, index=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("flavor", sa.Text, nullable=False),  # JSON: the flavor as booted
    sa.Column("image_ref", sa.String(255), nullable=False),
    sa.Column("host", sa.String(255), nullable=True, index=True),
    sa.Column("vm_state", sa.String(32), nullable=False),
    sa.Column("task_state", sa.String(32), nullable=True),
    sa.Column("power_state", sa.Integer, nullable=False),
    sa.Column("fault", sa.Text, nullable=True),  # JSON
    sa.Column("reservation_id", sa.String(64), nullable=False),
    sa.Column("launch_index", sa.Integer, nullable=False),
    sa.Column("deleted", sa.Boolean, nullable=False),
    sa.Column("launched_at", sa.DateTime, nullable=True),
    sa.Column("deleted_at", sa.DateTime, nullable=True),
    *timestamps(),
)

compute_migrations = sa.Table(
    "compute_migrations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("server_uuid", sa.String(36), nullable=False, index=True),
    sa.Column("migration_type", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32), nullable=False, index=True),
    sa.Column("source_compute", sa.String(255), nullable=True),
    sa.Column("dest_compute", sa.String(255), nullable=True),
    sa.Column("source_provider", sa.String(36), nullable=True),
    sa.Column("dest_provider", sa.String(36), nullable=True),
    sa.Column("flavor_id", sa.Integer, nullable=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("stuck", sa.Boolean, nullable=False),  # the lab never advances it
    sa.Column("next_step_at", sa.DateTime, nullable=True),
    *timestamps(),
)

# What was asked of each server, as Nova's instance actions (os-instance-actions):
# the action (create, resize, migrate, live-migration, evacuate, ...), the request
# id of the compute API call that asked it (the id the caller holds, and the global
# request id sent on to Placement), who asked, when, and its events as JSON.
compute_instance_actions = sa.Table(
    "compute_instance_actions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("server_uuid", sa.String(36), nullable=False, index=True),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("request_id", sa.String(64), nullable=False, index=True),
    sa.Column("user_id", sa.String(255), nullable=True),
    sa.Column("project_id", sa.String(255), nullable=True),
    sa.Column("start_time", sa.DateTime, nullable=False),
    sa.Column("finish_time", sa.DateTime, nullable=True),
    sa.Column("message", sa.Text, nullable=True),
    sa.Column("events", sa.Text, nullable=False),  # JSON list of Nova's event records
    *timestamps(),
)

lab_secrets = sa.Table(
    "lab_secrets",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(255), nullable=False),
    *timestamps(),
)
