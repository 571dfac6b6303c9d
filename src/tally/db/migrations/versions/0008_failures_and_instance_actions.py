"""why no valid host: the requests of GET /allocation_candidates that found nothing,
with their verdicts; and the lab compute's instance actions (os-instance-actions),
whose request ids find them

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07 07:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tally_failures",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"),
            nullable=False,
        ),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("global_request_id", sa.String(length=64), nullable=True),
        sa.Column("user_id", sa.String(length=255), nullable=True),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("microversion", sa.String(length=16), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("reason", sa.String(length=255), nullable=True),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("tally_failures_request_idx", "tally_failures", ["request_id"])
    op.create_index("tally_failures_global_request_idx", "tally_failures", ["global_request_id"])
    op.create_table(
        "compute_instance_actions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("server_uuid", sa.String(length=36), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=True),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("start_time", sa.DateTime(), nullable=False),
        sa.Column("finish_time", sa.DateTime(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_compute_instance_actions_server_uuid", "compute_instance_actions", ["server_uuid"]
    )
    op.create_index(
        "ix_compute_instance_actions_request_id", "compute_instance_actions", ["request_id"]
    )


def downgrade() -> None:
    op.drop_table("compute_instance_actions")
    op.drop_table("tally_failures")
