"""Data migrations: a database written by an older Tally reads right after upgrade."""

from __future__ import annotations

import json

import sqlalchemy as sa

from tally.compute.ops.servers import LAB_IMAGE
from tally.db import migrate
from tally.db.compute_schema import compute_servers


def lab_server(uuid: str, image_ref: str) -> dict:
    return {
        "uuid": uuid,
        "name": uuid,
        "project_id": "demo",
        "user_id": "alice",
        "flavor": json.dumps({"vcpus": 1, "ram": 512, "disk": 10}),
        "image_ref": image_ref,
        "vm_state": "active",
        "power_state": 1,
        "reservation_id": "r-1",
        "launch_index": 0,
        "deleted": False,
    }


def test_lab_servers_booted_without_an_image_get_the_lab_image(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    migrate.upgrade(engine, "0004")  # the lab of before: "" for no imageRef
    with engine.begin() as conn:
        conn.execute(
            compute_servers.insert(),
            [lab_server("no-image", ""), lab_server("cirros", "6a3c0e1e-cirros")],
        )
    migrate.upgrade(engine)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(compute_servers.c.uuid, compute_servers.c.image_ref))
        found = {uuid: image for uuid, image in rows}
    # "" would now read as booted from a volume, whose root disk Nova never claims
    assert found == {"no-image": LAB_IMAGE, "cirros": "6a3c0e1e-cirros"}
    assert migrate.current_revision(engine) == migrate.head_revision() == "0005"
