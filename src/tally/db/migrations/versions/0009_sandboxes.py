"""what if: sandboxes, the changes tried on a copy-on-write overlay of the live
cloud (issue 41), kept in the database so every worker and host serves them

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-20 09:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_MICROSECONDS = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "tally_sandboxes",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", _MICROSECONDS, nullable=False),
        sa.Column("expires_at", _MICROSECONDS, nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column(
            "steps", sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("tally_sandboxes")
