"""claim history: one row per change of allocations, inventories, providers, traits
and aggregates

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 18:10:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tally_history",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"),
            nullable=False,
        ),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("global_request_id", sa.String(length=64), nullable=True),
        sa.Column("user_id", sa.String(length=255), nullable=True),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("consumer_uuid", sa.String(length=36), nullable=True),
        sa.Column("consumer_project_id", sa.String(length=255), nullable=True),
        sa.Column("consumer_user_id", sa.String(length=255), nullable=True),
        sa.Column("consumer_type", sa.String(length=255), nullable=True),
        sa.Column("consumer_generation", sa.Integer(), nullable=True),
        sa.Column("provider_uuid", sa.String(length=36), nullable=True),
        sa.Column("provider_generation", sa.Integer(), nullable=True),
        sa.Column("resource_class", sa.String(length=255), nullable=True),
        sa.Column("amount_before", sa.BigInteger(), nullable=True),
        sa.Column("amount_after", sa.BigInteger(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("tally_history_consumer_idx", "tally_history", ["consumer_uuid", "id"])
    op.create_index("tally_history_provider_idx", "tally_history", ["provider_uuid", "id"])


def downgrade() -> None:
    op.drop_index("tally_history_provider_idx", table_name="tally_history")
    op.drop_index("tally_history_consumer_idx", table_name="tally_history")
    op.drop_table("tally_history")
