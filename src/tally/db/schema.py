"""Tables of the Placement service (SQLAlchemy Core).

Standard resource classes keep the ids os-resource-classes gives them (their index in
`STANDARDS`); custom classes start at `CUSTOM_RC_START_ID`, as upstream does, so the
two never collide and a standard class keeps its id across releases.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# `metadata` (shared with the lab's tables, `compute_schema`) is read from here too.
from tally.db.base import metadata, timestamps

CUSTOM_RC_START_ID = 10000


resource_classes = sa.Table(
    "resource_classes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    *timestamps(),
)

resource_providers = sa.Table(
    "resource_providers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("name", sa.Unicode(200), nullable=False, unique=True),
    sa.Column("generation", sa.Integer, nullable=False, default=0),
    sa.Column("root_provider_id", sa.Integer, nullable=True, index=True),
    sa.Column("parent_provider_id", sa.Integer, nullable=True, index=True),
    *timestamps(),
)

inventories = sa.Table(
    "inventories",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("resource_provider_id", sa.Integer, nullable=False),
    sa.Column("resource_class_id", sa.Integer, nullable=False, index=True),
    sa.Column("total", sa.Integer, nullable=False),
    sa.Column("reserved", sa.Integer, nullable=False),
    sa.Column("min_unit", sa.Integer, nullable=False),
    sa.Column("max_unit", sa.Integer, nullable=False),
    sa.Column("step_size", sa.Integer, nullable=False),
    sa.Column("allocation_ratio", sa.Float, nullable=False),
    *timestamps(),
    sa.UniqueConstraint("resource_provider_id", "resource_class_id", name="uniq_inventories_rp_rc"),
)

consumer_types = sa.Table(
    "consumer_types",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Unicode(255), nullable=False, unique=True),
    *timestamps(),
)

consumers = sa.Table(
    "consumers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False, default=0),
    sa.Column("consumer_type_id", sa.Integer, nullable=True, index=True),
    *timestamps(),
    sa.Index("consumers_project_user_idx", "project_id", "user_id"),
)

allocations = sa.Table(
    "allocations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("resource_provider_id", sa.Integer, nullable=False),
    sa.Column("consumer_id", sa.String(36), nullable=False, index=True),
    sa.Column("resource_class_id", sa.Integer, nullable=False, index=True),
    sa.Column("used", sa.Integer, nullable=False),
    *timestamps(),
    sa.Index("allocations_rp_rc_used_idx", "resource_provider_id", "resource_class_id", "used"),
)

traits = sa.Table(
    "traits",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Unicode(255), nullable=False, unique=True),
    *timestamps(),
)

resource_provider_traits = sa.Table(
    "resource_provider_traits",
    metadata,
    sa.Column("resource_provider_id", sa.Integer, primary_key=True),
    sa.Column("trait_id", sa.Integer, primary_key=True, index=True),
    *timestamps(),
)

placement_aggregates = sa.Table(
    "placement_aggregates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False, unique=True),
    *timestamps(),
)

resource_provider_aggregates = sa.Table(
    "resource_provider_aggregates",
    metadata,
    sa.Column("resource_provider_id", sa.Integer, primary_key=True),
    sa.Column("aggregate_id", sa.Integer, primary_key=True, index=True),
    *timestamps(),
)

MAX_INT = 2147483647  # the INT columns of an inventory (and of an allocation's amount)
# The largest capacity, int((total - reserved) * allocation_ratio), a write may
# give an inventory. The searches compute capacity in SQL from the stored
# fields: PostgreSQL casts it to BIGINT (an error past 2^63, failing every
# search for everyone) and adds an amount to a BIGINT usage; SQLite's CAST
# saturates at 2^63 - 1; all compare usage + amount with the double product.
# Up to 2^53 every one of those is exact in a double, on each backend and in
# Python, and usage (which never exceeds a capacity that was) stays in range
# with it; JSON readers that hold numbers as doubles read it exactly too. No
# real inventory comes near (2^31 units at a ratio of four million).
MAX_CAPACITY = 2**53 - 1

# The ledger journal (tally.db.journal): each database connection that writes is a
# writer with its own version row, bumped by its own transactions only, so writes on
# different connections (workers, hosts, cluster nodes) share no row; the changes
# name which providers each writer's version changed. Writer 0 holds the versions of
# writers retired after a day idle, so the sum of all versions only ever grows.
ledger_writers = sa.Table(
    "tally_ledger_writers",
    metadata,
    sa.Column("writer", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("touched", sa.DateTime, nullable=False),
)

ledger_changes = sa.Table(
    "tally_ledger_changes",
    metadata,
    sa.Column("writer", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
    # a provider id; 0: names (classes, traits) changed; -1: reload everything
    sa.Column("provider_id", sa.Integer, primary_key=True, autoincrement=False),
    # true: only the provider's usage and generation changed (a claim): a reader
    # catching up re-reads just those
    sa.Column("usage_only", sa.Boolean, nullable=False, server_default=sa.false()),
)

# The claim history (tally.db.history_writer): one row per change a write made (an allocation,
# an inventory, a provider created, re-parented or deleted, a provider's traits or
# aggregates), written in that write's transaction; pruned by age and count. Narrow:
# the keys the API filters on are columns (indexed with `id`, the order of the rows),
# the rest of a change is the JSON `detail`.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite: the rowid
_MICROSECONDS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

history = sa.Table(
    "tally_history",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("created_at", _MICROSECONDS, nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    # who asked: the request, the caller's global request id (Nova's), user and project
    sa.Column("request_id", sa.String(64), nullable=True),
    sa.Column("global_request_id", sa.String(64), nullable=True),
    sa.Column("user_id", sa.String(255), nullable=True),
    sa.Column("project_id", sa.String(255), nullable=True),
    # what changed
    sa.Column("consumer_uuid", sa.String(36), nullable=True),
    sa.Column("consumer_project_id", sa.String(255), nullable=True),
    sa.Column("consumer_user_id", sa.String(255), nullable=True),
    sa.Column("consumer_type", sa.String(255), nullable=True),
    sa.Column("consumer_generation", sa.Integer, nullable=True),
    sa.Column("provider_uuid", sa.String(36), nullable=True),
    sa.Column("provider_generation", sa.Integer, nullable=True),
    sa.Column("resource_class", sa.String(255), nullable=True),
    sa.Column("amount_before", sa.BigInteger, nullable=True),
    sa.Column("amount_after", sa.BigInteger, nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Index("tally_history_consumer_idx", "consumer_uuid", "id"),
    sa.Index("tally_history_provider_idx", "provider_uuid", "id"),
    # No index on created_at: ids grow with time, so pruning the oldest reads from the
    # start of the table, and a time range is read along an index above (or by id).
)

# Requests of GET /allocation_candidates that found nothing (issue 39): the query as
# asked, who asked (the request, the caller's global request id: Nova's, which the
# user sees in `openstack server event list`), and the verdict computed from the
# state the search saw (`candidates.why`) as JSON. Written after the answer, off its
# path; pruned by age and count like the history.
failures = sa.Table(
    "tally_failures",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("created_at", _MICROSECONDS, nullable=False),
    sa.Column("request_id", sa.String(64), nullable=True),
    sa.Column("global_request_id", sa.String(64), nullable=True),
    sa.Column("user_id", sa.String(255), nullable=True),
    sa.Column("project_id", sa.String(255), nullable=True),
    sa.Column("microversion", sa.String(16), nullable=False),
    sa.Column("query", sa.Text, nullable=False),  # the query string as received
    sa.Column("reason", sa.String(255), nullable=True),  # the dominant one
    sa.Column("verdict", sa.Text, nullable=False),  # JSON
    sa.Index("tally_failures_request_idx", "request_id"),
    sa.Index("tally_failures_global_request_idx", "global_request_id"),
)

# What-if sandboxes (issue 41, `placement.ledger.sandbox`): the changes tried in one,
# as JSON steps (each with its verdict, the write it stands for and the generations it
# read), so every worker and API host serves the same sandbox; `revision` counts the
# times its changes were extended (a compare-and-swap: two extending it at once, one
# loses). Gone after `expires_at`, when deleted, or once committed.
sandboxes = sa.Table(
    "tally_sandboxes",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("created_at", _MICROSECONDS, nullable=False),
    sa.Column("expires_at", _MICROSECONDS, nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column(
        "steps", sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb"), nullable=False
    ),
)
