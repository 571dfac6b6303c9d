"""Upstream OpenStack Placement's database, as facts: its Alembic revisions and its
tables at the head of openstack-placement 16.0.0 (`a082b8bb98d0`), written down
from its migrations (`placement/db/sqlalchemy/alembic/versions`), so `tally db
export` can create that schema and `tally db import` can read it.

How it differs from Tally's (`tally.db.schema`): projects and users are rows of
their own (`projects.external_id`, `users.external_id`) that consumers point to by
integer id; a provider's name and generation may be NULL; foreign keys are declared
(providers -> parent/root, provider traits -> traits and providers, consumers ->
consumer types); constraints and indexes carry upstream's names.
"""

from __future__ import annotations

import sqlalchemy as sa

# Every revision upstream ever had, oldest first (its alembic_version.version_num).
REVISIONS = (
    "b4ed3a175331",  # initial
    "611cd6dffd7b",  # block on null root_provider_id
    "b5c396305c25",  # block on null consumer
    "422ece571366",  # consumer types
    "a082b8bb98d0",  # drop indexes made redundant by unique constraints (16.0.0 head)
)
IMPORTABLE = ("422ece571366", "a082b8bb98d0")  # same tables and columns
HEAD = "a082b8bb98d0"
RELEASE = "openstack-placement 16.0.0"

metadata = sa.MetaData()


def _times() -> list[sa.Column]:
    return [sa.Column("created_at", sa.DateTime), sa.Column("updated_at", sa.DateTime)]


allocations = sa.Table(
    "allocations",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("resource_provider_id", sa.Integer, nullable=False),
    sa.Column("consumer_id", sa.String(36), nullable=False),
    sa.Column("resource_class_id", sa.Integer, nullable=False),
    sa.Column("used", sa.Integer, nullable=False),
    sa.Index(
        "allocations_resource_provider_class_used_idx",
        "resource_provider_id",
        "resource_class_id",
        "used",
    ),
    sa.Index("allocations_resource_class_id_idx", "resource_class_id"),
    sa.Index("allocations_consumer_id_idx", "consumer_id"),
)

consumer_types = sa.Table(
    "consumer_types",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Unicode(255), nullable=False),
    sa.UniqueConstraint("name", name="uniq_consumer_types0name"),
)

consumers = sa.Table(
    "consumers",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False),
    sa.Column("project_id", sa.Integer, nullable=False),
    sa.Column("user_id", sa.Integer, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column(
        "consumer_type_id",
        sa.Integer,
        sa.ForeignKey("consumer_types.id", name="consumers_consumer_type_id_fkey"),
        nullable=True,
    ),
    sa.UniqueConstraint("uuid", name="uniq_consumers0uuid"),
    sa.Index("consumers_project_id_user_id_uuid_idx", "project_id", "user_id", "uuid"),
    sa.Index("consumers_project_id_uuid_idx", "project_id", "uuid"),
    sa.Index("consumers_consumer_type_id_idx", "consumer_type_id"),
)

inventories = sa.Table(
    "inventories",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("resource_provider_id", sa.Integer, nullable=False),
    sa.Column("resource_class_id", sa.Integer, nullable=False),
    sa.Column("total", sa.Integer, nullable=False),
    sa.Column("reserved", sa.Integer, nullable=False),
    sa.Column("min_unit", sa.Integer, nullable=False),
    sa.Column("max_unit", sa.Integer, nullable=False),
    sa.Column("step_size", sa.Integer, nullable=False),
    sa.Column("allocation_ratio", sa.Float, nullable=False),
    sa.UniqueConstraint(
        "resource_provider_id",
        "resource_class_id",
        name="uniq_inventories0resource_provider_resource_class",
    ),
    sa.Index("inventories_resource_class_id_idx", "resource_class_id"),
)

placement_aggregates = sa.Table(
    "placement_aggregates",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=True),
    sa.UniqueConstraint("uuid", name="uniq_placement_aggregates0uuid"),
)

projects = sa.Table(
    "projects",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("external_id", sa.String(255), nullable=False),
    sa.UniqueConstraint("external_id", name="uniq_projects0external_id"),
)

resource_classes = sa.Table(
    "resource_classes",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.UniqueConstraint("name", name="uniq_resource_classes0name"),
)

resource_provider_aggregates = sa.Table(
    "resource_provider_aggregates",
    metadata,
    *_times(),
    sa.Column("resource_provider_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("aggregate_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Index("resource_provider_aggregates_aggregate_id_idx", "aggregate_id"),
)

resource_providers = sa.Table(
    "resource_providers",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("uuid", sa.String(36), nullable=False),
    sa.Column("name", sa.Unicode(200), nullable=True),
    sa.Column("generation", sa.Integer, nullable=True),
    sa.Column("root_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id")),
    sa.Column("parent_provider_id", sa.Integer, sa.ForeignKey("resource_providers.id")),
    sa.UniqueConstraint("name", name="uniq_resource_providers0name"),
    sa.UniqueConstraint("uuid", name="uniq_resource_providers0uuid"),
    sa.Index("resource_providers_parent_provider_id_idx", "parent_provider_id"),
    sa.Index("resource_providers_root_provider_id_idx", "root_provider_id"),
)

traits = sa.Table(
    "traits",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Unicode(255), nullable=False),
    sa.UniqueConstraint("name", name="uniq_traits0name"),
)

users = sa.Table(
    "users",
    metadata,
    *_times(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("external_id", sa.String(255), nullable=False),
    sa.UniqueConstraint("external_id", name="uniq_users0external_id"),
)

resource_provider_traits = sa.Table(
    "resource_provider_traits",
    metadata,
    *_times(),
    sa.Column(
        "trait_id",
        sa.Integer,
        sa.ForeignKey("traits.id"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Column(
        "resource_provider_id",
        sa.Integer,
        sa.ForeignKey("resource_providers.id"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Index(
        "resource_provider_traits_resource_provider_trait_idx",
        "resource_provider_id",
        "trait_id",
    ),
)

# Alembic's own table, as `placement-manage db sync` leaves it.
alembic_version = sa.Table(
    "alembic_version",
    metadata,
    sa.Column("version_num", sa.String(32), nullable=False),
    sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)

DATA_TABLES = tuple(t.name for t in metadata.sorted_tables if t.name != "alembic_version")
# Tables only upstream has; with any of these beside `alembic_version`, a database is
# upstream's (Tally keeps project and user ids on the consumer row).
ONLY_UPSTREAM = ("projects", "users")


def create_schema(conn: sa.Connection) -> None:
    """Upstream's tables at `HEAD`, stamped, in an empty database."""
    metadata.create_all(conn)
    conn.execute(alembic_version.insert().values(version_num=HEAD))
