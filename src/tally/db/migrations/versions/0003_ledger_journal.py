"""ledger journal: a version counter and the providers each write changed

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 17:05:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    version = op.create_table(
        "tally_ledger_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "tally_ledger_changes",
        sa.Column("version", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("provider_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("version", "provider_id"),
    )
    op.bulk_insert(version, [{"id": 1, "version": 1}])


def downgrade() -> None:
    op.drop_table("tally_ledger_changes")
    op.drop_table("tally_ledger_version")
