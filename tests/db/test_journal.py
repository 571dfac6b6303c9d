"""The ledger journal: each write transaction adds one version naming what it
changed, in the same transaction; a refused or rolled-back write adds nothing."""

from __future__ import annotations

import uuid as uuidlib

import pytest
import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tally.db.engine import at_commit, transaction


def _state(engine: sa.Engine) -> tuple[int, list[tuple[int, int]]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(t.ledger_changes.c.version, t.ledger_changes.c.provider_id).order_by(
                t.ledger_changes.c.version, t.ledger_changes.c.provider_id
            )
        ).all()
        return journal.current(conn), [tuple(r) for r in rows]


def _provider_id(engine: sa.Engine, uuid: str) -> int:
    with engine.connect() as conn:
        rp = t.resource_providers
        return conn.execute(sa.select(rp.c.id).where(rp.c.uuid == uuid)).scalar_one()


def test_each_write_is_one_version_naming_its_providers(api, engine):
    client = api("1.39")
    start, _ = _state(engine)
    rp = str(uuidlib.uuid4())
    assert client.simulate_post("/resource_providers", json={"name": "a", "uuid": rp}).status_code
    rp_id = _provider_id(engine, rp)
    version, rows = _state(engine)
    assert version == start + 1 and rows[-1] == (start + 1, rp_id)

    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
    claim = {
        "allocations": {rp: {"resources": {"VCPU": 1}}},
        "consumer_generation": None,
        "project_id": "p",
        "user_id": "u",
        "consumer_type": "INSTANCE",
    }
    consumer = str(uuidlib.uuid4())
    assert client.simulate_put(f"/allocations/{consumer}", json=claim).status_code == 204
    assert client.simulate_delete(f"/allocations/{consumer}").status_code == 204
    version, rows = _state(engine)
    assert version == start + 4
    assert [r for r in rows if r[0] > start + 1] == [(start + v, rp_id) for v in (2, 3, 4)]

    assert client.simulate_put("/traits/CUSTOM_NEW").status_code == 201
    version, rows = _state(engine)
    assert rows[-1] == (start + 5, journal.NAMES)


def test_a_refused_write_leaves_no_version(api, engine):
    client = api("1.39")
    rp = str(uuidlib.uuid4())
    client.simulate_post("/resource_providers", json={"name": "a", "uuid": rp})
    before = _state(engine)
    stale = {"resource_provider_generation": 7, "inventories": {"VCPU": {"total": 4}}}
    resp = client.simulate_put(f"/resource_providers/{rp}/inventories", json=stale)
    assert resp.status_code == 409
    assert _state(engine) == before


def test_a_rolled_back_transaction_leaves_nothing_pending(engine):
    before = _state(engine)
    with pytest.raises(RuntimeError), transaction(engine, write=True) as conn:
        journal.touch(conn, (42,))
        raise RuntimeError("the body failed")
    with transaction(engine, write=True) as conn:  # may reuse the same connection
        pass
    assert _state(engine) == before


def test_a_deleted_version_row_starts_again_past_every_change(engine):
    with transaction(engine, write=True) as conn:
        journal.touch(conn, (1,))
    newest = _state(engine)[0]
    with engine.begin() as conn:
        conn.execute(t.ledger_version.delete())
    with transaction(engine, write=True) as conn:
        journal.touch(conn, (2,))
    version, rows = _state(engine)
    assert version == newest + 1 and rows[-1] == (newest + 1, 2)


def test_every_thousandth_version_drops_changes_no_reader_needs(engine):
    with transaction(engine, write=True) as conn:
        journal.touch(conn, (1,))
    now = _state(engine)[0]
    step = journal.PRUNE_EVERY
    last_before = (now // step + 2) * step - 1  # the next write makes a multiple of step
    old, kept = last_before + 1 - journal.KEEP, last_before + 2 - journal.KEEP
    with engine.begin() as conn:
        conn.execute(
            t.ledger_changes.insert(), [{"version": v, "provider_id": 7} for v in (old, kept)]
        )
        conn.execute(t.ledger_version.update().values(version=last_before))
    with transaction(engine, write=True) as conn:
        journal.touch(conn, (3,))
    version, rows = _state(engine)
    assert version == last_before + 1
    assert (old, 7) not in rows and (kept, 7) in rows and rows[-1] == (version, 3)


def test_a_write_refused_as_it_commits_leaves_nothing(engine):
    """On PostgreSQL the journal's version and the history rows go with the COMMIT:
    a statement refused there rolls the whole transaction back."""
    before = _state(engine)
    with pytest.raises(sa.exc.DBAPIError), transaction(engine, write=True) as conn:
        conn.execute(t.ledger_changes.insert().values(version=10**12, provider_id=5))
        journal.touch(conn, (5,))
        clash = f"INSERT INTO {t.ledger_changes.name} (version, provider_id) VALUES (:v, 5)"
        at_commit(conn, sa.text(clash), {"v": 10**12})  # that row is there: refused
    assert _state(engine) == before
    with transaction(engine, write=True) as conn:  # the connection is usable again
        journal.touch(conn, (6,))
    assert _state(engine)[1][-1] == (before[0] + 1, 6)
