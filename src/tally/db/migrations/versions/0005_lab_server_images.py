"""lab servers: an image on every server not booted from a volume

The lab recorded "" for a server booted without imageRef, which the compute API
shows exactly as Nova shows a server booted from a volume (whose root disk Nova
does not claim in Placement). Those servers did claim their root disk: they get the
lab's image (tally.compute.ops.servers.LAB_IMAGE), as new ones do.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 08:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

LAB_IMAGE = "00000000-0000-4000-8000-00000000a1b0"  # the value of that constant today


def upgrade() -> None:
    servers = sa.table("compute_servers", sa.column("image_ref", sa.String))
    op.execute(servers.update().where(servers.c.image_ref == "").values(image_ref=LAB_IMAGE))


def downgrade() -> None:
    pass  # which servers had no image is not kept; "" would read as booted from a volume
