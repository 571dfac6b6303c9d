"""Tables of the Placement service (SQLAlchemy Core).

Standard resource classes keep the ids os-resource-classes gives them (their index in
`STANDARDS`); custom classes start at `CUSTOM_RC_START_ID`, as upstream does, so the
two never collide and a standard class keeps its id across releases.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

CUSTOM_RC_START_ID = 10000


def timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=True),
    ]


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
