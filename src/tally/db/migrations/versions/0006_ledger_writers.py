"""ledger journal without a shared row: a version row per writing connection

The single version row every write transaction bumped queued writers on one node
and made any two concurrent writes conflict across the nodes of a Galera cluster.
Each writing connection now bumps its own row (tally.db.journal). The old journal's
rows are not carried over: a running index reloads once.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 21:30:00
"""

import datetime as dt

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("tally_ledger_changes")
    op.drop_table("tally_ledger_version")
    writers = op.create_table(
        "tally_ledger_writers",
        sa.Column("writer", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("touched", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("writer"),
    )
    op.create_table(
        "tally_ledger_changes",
        sa.Column("writer", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("provider_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("writer", "version", "provider_id"),
    )
    # writer 0: the versions of retired writers (none yet)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    op.bulk_insert(writers, [{"writer": 0, "version": 0, "touched": now}])


def downgrade() -> None:
    op.drop_table("tally_ledger_changes")
    op.drop_table("tally_ledger_writers")
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
