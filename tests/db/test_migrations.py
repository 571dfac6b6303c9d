"""Data migrations: a database written by an older Tally reads right after upgrade."""

from __future__ import annotations

import json

import sqlalchemy as sa

from tally.compute.ops.servers import LAB_IMAGE
from tally.db import journal, migrate
from tally.db.compute_schema import compute_servers
from tally.db.transaction import transaction


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
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_the_one_row_journal_becomes_a_journal_of_writers(tmp_path):
    """A database of the one version row upgrades to a row per writer: the old rows
    go (a running index reloads once), writes after it number from writer 0's zero."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    migrate.upgrade(engine, "0005")
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE tally_ledger_version SET version = 812")
        conn.exec_driver_sql("INSERT INTO tally_ledger_changes VALUES (812, 4)")
    migrate.upgrade(engine)
    with engine.begin() as conn:
        assert journal.vector(conn) == {journal.RETIRED: 0}
        assert "tally_ledger_version" not in sa.inspect(conn).get_table_names()
    with transaction(engine, write=True) as conn:
        journal.touch(conn, (4,))
    with engine.connect() as conn:
        assert journal.current(conn) == 1
        assert journal.since(conn, {journal.RETIRED: 0}).providers == {4}
