"""ledger journal: a change that was only usage (a claim) says so

A reader catching up then re-reads only the usage and generation of those
providers, not their inventories, traits and aggregates. Rows written before (or by
a worker not yet upgraded) read as full changes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 04:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "tally_ledger_changes",
        sa.Column("usage_only", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("tally_ledger_changes") as table:
        table.drop_column("usage_only")
