"""The ledger journal: each write transaction adds one version of its connection's
writer naming what it changed, in the same transaction; a refused or rolled-back
write adds nothing; writes on different connections share no row."""

from __future__ import annotations

import datetime as dt
import threading
import uuid as uuidlib

import pytest
import sqlalchemy as sa

from tally.db import journal
from tally.db import schema as t
from tally.db.transaction import at_commit, transaction, write_on

Changes = set[tuple[int, int, int]]


def _state(engine: sa.Engine) -> tuple[int, Changes]:
    """The journal's total and every change row (writer, version, provider)."""
    with engine.connect() as conn:
        c = t.ledger_changes
        rows = conn.execute(sa.select(c.c.writer, c.c.version, c.c.provider_id))
        return journal.current(conn), {tuple(r) for r in rows}


def _provider_id(engine: sa.Engine, uuid: str) -> int:
    with engine.connect() as conn:
        rp = t.resource_providers
        return conn.execute(sa.select(rp.c.id).where(rp.c.uuid == uuid)).scalar_one()


def _claim(rp: str) -> dict:
    """A new consumer's claim of one VCPU on `rp` (as Nova's scheduler makes it)."""
    return {
        "allocations": {rp: {"resources": {"VCPU": 1}}},
        "consumer_generation": None,
        "project_id": "p",
        "user_id": "u",
        "consumer_type": "INSTANCE",
    }


def _new_versions(before: Changes, after: Changes) -> dict[tuple[int, int], set[int]]:
    """(writer, version) -> providers, of the change rows added."""
    found: dict[tuple[int, int], set[int]] = {}
    for writer, version, provider in after - before:
        found.setdefault((writer, version), set()).add(provider)
    return found


def test_each_write_is_one_version_naming_its_providers(api, engine):
    client = api("1.39")
    total, rows = _state(engine)
    rp = str(uuidlib.uuid4())
    assert client.simulate_post("/resource_providers", json={"name": "a", "uuid": rp}).status_code
    rp_id = _provider_id(engine, rp)
    total_after, rows_after = _state(engine)
    assert total_after == total + 1
    assert list(_new_versions(rows, rows_after).values()) == [{rp_id}]

    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
    claim = _claim(rp)
    consumer = str(uuidlib.uuid4())
    assert client.simulate_put(f"/allocations/{consumer}", json=claim).status_code == 204
    assert client.simulate_delete(f"/allocations/{consumer}").status_code == 204
    total_now, rows_now = _state(engine)
    assert total_now == total + 4
    assert list(_new_versions(rows_after, rows_now).values()) == [{rp_id}] * 3

    assert client.simulate_put("/traits/CUSTOM_NEW").status_code == 201
    assert list(_new_versions(rows_now, _state(engine)[1]).values()) == [{journal.NAMES}]


def test_a_writer_numbers_its_versions_one_after_another(engine):
    with engine.connect() as raw:
        writer = None
        for provider in (1, 2, 3):
            with write_on(raw) as conn:
                journal.touch(conn, (provider,))
                writer = journal.writer_of(conn)
    with engine.connect() as conn:
        c = t.ledger_changes
        mine = conn.execute(
            sa.select(c.c.version, c.c.provider_id)
            .where(c.c.writer == writer)
            .order_by(c.c.version)
        ).all()
    first = mine[-3].version  # (the connection may have written before, as it was made)
    assert [tuple(r) for r in mine[-3:]] == [(first, 1), (first + 1, 2), (first + 2, 3)]


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


def test_a_write_refused_as_it_commits_leaves_nothing(engine):
    """On PostgreSQL the journal's version and the history rows go with the COMMIT:
    a statement refused there rolls the whole transaction back."""
    before = _state(engine)
    c = t.ledger_changes
    with pytest.raises(sa.exc.DBAPIError), transaction(engine, write=True) as conn:
        conn.execute(c.insert().values(writer=5, version=10**12, provider_id=5))
        journal.touch(conn, (5,))
        clash = f"INSERT INTO {c.name} (writer, version, provider_id) VALUES (5, :v, 5)"
        at_commit(conn, sa.text(clash), {"v": 10**12})  # that row is there: refused
    assert _state(engine) == before
    with transaction(engine, write=True) as conn:  # the connection is usable again
        journal.touch(conn, (6,))
    total, rows = _state(engine)
    assert total == before[0] + 1 and list(_new_versions(before[1], rows).values()) == [{6}]


def test_writes_on_two_connections_share_no_row(backend, engine):
    """While one connection holds its writer row locked (as its own write does from
    its flush to its commit), a write on another connection commits at once: on the
    one version row of old, it waited (and on Galera the two conflicted)."""
    if backend == "sqlite":
        pytest.skip("SQLite lets one writer in at a time by design: nothing to share")
    with engine.connect() as holder:
        holder.begin()
        journal._flush(holder, {1: False})  # the flush's statements, run now and held open
        done = threading.Event()

        def other_write() -> None:
            with transaction(engine, write=True) as conn:
                journal.touch(conn, (2,))
            done.set()

        thread = threading.Thread(target=other_write, daemon=True)
        thread.start()
        assert done.wait(10), "a write on another connection waited on the held writer row"
        holder.rollback()
        thread.join()


def _retire_setup(engine: sa.Engine, raw: sa.Connection) -> tuple[int, dict[int, int]]:
    """A writer (`raw`, kept out of the pool meanwhile) that wrote twice, then sat
    idle for longer than IDLE_RETIRED."""
    for provider in (11, 12):
        with write_on(raw) as conn:
            journal.touch(conn, (provider,))
    idle = journal.writer_of(raw)
    w = t.ledger_writers
    with engine.begin() as conn:
        long_ago = dt.datetime.now(dt.UTC).replace(tzinfo=None) - 2 * journal.IDLE_RETIRED
        conn.execute(w.update().where(w.c.writer == idle).values(touched=long_ago))
        return idle, journal.vector(conn)


def test_maintenance_retires_idle_writers_keeping_the_total(engine, monkeypatch):
    with engine.connect() as raw:
        idle, known = _retire_setup(engine, raw)
        total = sum(known.values())
        monkeypatch.setattr(journal, "_flushes", iter([journal.MAINTAIN_EVERY]))
        with transaction(engine, write=True) as conn:  # another connection maintains
            journal.touch(conn, (13,))
    with engine.connect() as conn:
        now = journal.vector(conn)
        assert idle not in now
        assert now[journal.RETIRED] == known.get(journal.RETIRED, 0) + known[idle]
        assert journal.current(conn) == total + 1
        assert not [r for r in _state(engine)[1] if r[0] == idle]  # its changes went too
        caught = journal.since(conn, known)  # a reader that knew it whole: no reload
    assert caught is not None and caught.providers == {13} and caught.total == total + 1


def test_a_reader_that_missed_a_retired_writers_change_reloads(engine, monkeypatch):
    with engine.connect() as raw:
        idle, known = _retire_setup(engine, raw)
        behind = dict(known)
        behind[idle] -= 1  # it had not seen that writer's last version
        behind_total = sum(behind.values())
        monkeypatch.setattr(journal, "_flushes", iter([journal.MAINTAIN_EVERY]))
        with transaction(engine, write=True) as conn:
            journal.touch(conn, (14,))
    with engine.connect() as conn:
        assert journal.current(conn) != behind_total
        assert journal.since(conn, behind) is None


def test_maintenance_prunes_a_writers_own_old_changes(engine, monkeypatch):
    with engine.connect() as raw:
        with write_on(raw) as conn:
            journal.touch(conn, (1,))
        writer = journal.writer_of(raw)
        w, c = t.ledger_writers, t.ledger_changes
        first = raw.execute(sa.select(w.c.version).where(w.c.writer == writer)).scalar_one()
        raw.commit()
        far = first + journal.KEEP + 10  # as if KEEP + 10 more writes had passed
        with raw.begin():
            raw.execute(w.update().where(w.c.writer == writer).values(version=far))
            rows = [{"writer": writer, "version": first + v, "provider_id": 7} for v in (10, 11)]
            raw.execute(c.insert(), rows)
        monkeypatch.setattr(journal, "_flushes", iter([journal.MAINTAIN_EVERY]))
        with write_on(raw) as conn:
            journal.touch(conn, (3,))
    kept = {(v, p) for wr, v, p in _state(engine)[1] if wr == writer}
    # versions up to far - KEEP = first + 10 went (the first write's too)
    assert kept == {(first + 11, 7), (far + 1, 3)}
    with engine.connect() as conn:  # a reader that knew it at first + 8 cannot catch up
        assert journal.since(conn, {**journal.vector(conn), writer: first + 8}) is None


def test_a_claim_is_noted_as_usage_only_and_anything_more_wins(api, engine):
    """A reader re-reads only the usage of providers whose every change since it
    last looked was a claim (or a release); one other change makes it read them whole."""
    client = api("1.39")
    rp = str(uuidlib.uuid4())
    client.simulate_post("/resource_providers", json={"name": "u", "uuid": rp})
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    assert client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory).status
    rp_id = _provider_id(engine, rp)
    with engine.connect() as conn:
        known = journal.vector(conn)

    def since() -> journal.CaughtUp:
        with engine.connect() as conn:
            found = journal.since(conn, known)
        assert found is not None
        return found

    consumer = str(uuidlib.uuid4())
    claim = _claim(rp)
    assert client.simulate_put(f"/allocations/{consumer}", json=claim).status_code == 204
    assert client.simulate_delete(f"/allocations/{consumer}").status_code == 204
    found = since()
    assert found.providers == {rp_id} and found.usage_only == {rp_id}

    assert (
        client.simulate_put(
            f"/resource_providers/{rp}/traits",
            json={"resource_provider_generation": 2, "traits": ["HW_CPU_X86_AVX2"]},
        ).status_code
        == 200
    )
    found = since()
    assert found.providers == {rp_id} and found.usage_only == set()

    _, before = _state(engine)
    with transaction(engine, write=True) as conn:  # one write noting both: the more wins
        journal.touch(conn, [rp_id], usage_only=True)
        journal.touch(conn, [rp_id])
        journal.touch(conn, [rp_id], usage_only=True)
    _, after = _state(engine)
    (writer, version, _), *others = after - before
    assert not others
    with engine.connect() as conn:
        c = t.ledger_changes
        noted = conn.execute(
            sa.select(c.c.usage_only).where(c.c.writer == writer, c.c.version == version)
        ).scalar_one()
    assert noted is False


def test_a_note_outside_the_write_helper_is_refused(engine):
    """`touch` only queues a note that `transaction(write=True)` writes as it
    commits: on a bare transaction it would be lost, so it is refused."""
    with pytest.raises(RuntimeError, match="journal.touch"), engine.begin() as conn:
        journal.touch(conn, (1,))
    with pytest.raises(RuntimeError, match="journal.touch"), transaction(engine) as conn:
        journal.touch(conn, (1,))


def _one_new_version(engine: sa.Engine, write) -> set[int]:  # noqa: ANN001
    """The providers of the one version `write(conn)`, in a write transaction, adds."""
    _, before = _state(engine)
    with transaction(engine, write=True) as conn:
        write(conn)
    found = _new_versions(before, _state(engine)[1])
    assert len(found) == 1
    return found.popitem()[1]


def test_what_a_write_forgot_to_name_is_derived_as_it_commits(engine, caplog):
    """A change of classes or traits is noted from the tables written; provider
    tables written with no provider named reload every index (and say so)."""
    custom = {"name": "CUSTOM_DERIVED", "created_at": None}
    assert _one_new_version(engine, lambda c: c.execute(t.traits.insert(), custom)) == {
        journal.NAMES
    }
    agg = {"uuid": str(uuidlib.uuid4()), "created_at": None}
    with caplog.at_level("WARNING", logger="tally.db.journal"):
        everything = _one_new_version(
            engine, lambda c: c.execute(t.placement_aggregates.insert(), agg)
        )
    assert everything == {journal.EVERYTHING}
    assert "placement_aggregates named no provider" in caplog.text
    caplog.clear()

    def named(conn: sa.Connection) -> None:
        conn.execute(t.placement_aggregates.delete())
        journal.touch(conn, (7,))

    with caplog.at_level("WARNING", logger="tally.db.journal"):
        assert _one_new_version(engine, named) == {7}
    assert caplog.text == ""


def test_each_write_route_names_its_providers(api, engine, caplog):
    """No write path of the API leaves its providers to the whole reload."""
    client = api("1.39")
    rp, child = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    _, before = _state(engine)
    with caplog.at_level("WARNING", logger="tally.db.journal"):
        client.simulate_post("/resource_providers", json={"name": "w", "uuid": rp})
        child_body = {"name": "c", "uuid": child, "parent_provider_uuid": rp}
        client.simulate_post("/resource_providers", json=child_body)
        inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
        client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
        aggs = {"resource_provider_generation": 1, "aggregates": [str(uuidlib.uuid4())]}
        client.simulate_put(f"/resource_providers/{rp}/aggregates", json=aggs)
        consumer = str(uuidlib.uuid4())
        client.simulate_put(f"/allocations/{consumer}", json=_claim(rp))
        client.simulate_delete(f"/allocations/{consumer}")
        client.simulate_put(f"/resource_providers/{child}", json={"name": "c2"})
        client.simulate_delete(f"/resource_providers/{child}")
        client.simulate_put("/resource_classes/CUSTOM_W")
        client.simulate_delete("/resource_classes/CUSTOM_W")
    assert "named no provider" not in caplog.text
    noted = set().union(*_new_versions(before, _state(engine)[1]).values())
    assert journal.NAMES in noted and journal.EVERYTHING not in noted
