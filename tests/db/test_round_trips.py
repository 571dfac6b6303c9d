"""What a request costs in round trips, and the rules that make it cheap: reads
never write (on PostgreSQL they run in autocommit), a pooled connection is
pinged only after sitting idle, and a provider's insert reports a taken uuid or
name without spoiling the transaction."""

from __future__ import annotations

import contextlib
import uuid as uuidlib
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tally.db import autocommit_reads
from tally.db import engine as engine_module
from tally.db import schema as t
from tally.db.retry import unavailable
from tally.db.transaction import transaction
from tally.placement.ledger import providers
from tally.placement.ledger.common import utcnow
from tests.builders import provider_with_inventory

# these run on PostgreSQL only (the `backend` fixture narrowed to it)
POSTGRESQL_ONLY = pytest.mark.parametrize(
    "backend", [pytest.param("postgresql", marks=pytest.mark.postgres)]
)


def _provider_values(name: str) -> dict:
    return {
        "uuid": str(uuidlib.uuid4()),
        "name": name,
        "generation": 0,
        "parent_provider_id": None,
        "root_provider_id": None,
        "created_at": utcnow(),
    }


def test_a_write_in_a_read_transaction_is_refused(engine):
    with pytest.raises(RuntimeError, match="a write in a read transaction"):
        with transaction(engine) as conn:
            conn.execute(t.traits.insert().values(name="CUSTOM_SNEAKY", created_at=utcnow()))
    with transaction(engine) as conn:
        found = conn.execute(sa.select(t.traits.c.id).where(t.traits.c.name == "CUSTOM_SNEAKY"))
        assert found.first() is None
    with transaction(engine, write=True) as conn:  # a write transaction may
        conn.execute(t.traits.insert().values(name="CUSTOM_SNEAKY", created_at=utcnow()))


@POSTGRESQL_ONLY
def test_postgresql_reads_send_no_begin_or_commit(engine):
    with transaction(engine) as conn:
        conn.execute(sa.select(1)).scalar()
        assert conn.connection.dbapi_connection.autocommit is True
        status = conn.connection.dbapi_connection.info.transaction_status
        assert status.name == "IDLE"  # no transaction open on the server
    with transaction(engine, write=True) as conn:  # writes are transactions again
        conn.execute(sa.select(1)).scalar()
        assert conn.connection.dbapi_connection.autocommit is False
        assert conn.connection.dbapi_connection.info.transaction_status.name == "INTRANS"


def _count_pings(eng: sa.Engine) -> list[int]:
    pings: list[int] = []
    real = eng.dialect.do_ping

    def counted(dbapi_conn):  # noqa: ANN001
        pings.append(1)
        return real(dbapi_conn)

    eng.dialect.do_ping = counted  # type: ignore[method-assign]
    return pings


def _terminate_other_sessions(eng: sa.Engine, pid: int | None = None) -> None:
    """End, on the server, every session of `eng`'s database, or only the one of
    backend `pid` (from a connection of its own)."""
    killer = sa.create_engine(eng.url, poolclass=sa.pool.NullPool)
    with killer.begin() as conn:
        conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND (CAST(:pid AS integer) IS NULL OR pid = :pid)"
            ),
            {"pid": pid},
        )
    killer.dispose()


@POSTGRESQL_ONLY
def test_a_connection_idle_past_the_limit_is_pinged_and_replaced(engine, monkeypatch):
    pings = _count_pings(engine)
    engine.dispose()  # one pooled connection, used a moment ago
    with transaction(engine) as conn:
        held = conn.connection.dbapi_connection
    with transaction(engine) as conn:  # used a moment ago: no ping
        assert conn.connection.dbapi_connection is held
    assert pings == []
    monkeypatch.setattr(engine_module, "IDLE_PING_SECONDS", 0.0)
    _terminate_other_sessions(engine)  # the server ends every pooled session
    with transaction(engine) as conn:  # pinged, found dead, replaced: no error
        assert conn.execute(sa.select(1)).scalar() == 1
    assert pings


@POSTGRESQL_ONLY
def test_a_busy_connection_lost_fails_once_then_the_pool_is_fresh(engine):
    with transaction(engine) as conn:
        conn.execute(sa.select(1)).scalar()
    _terminate_other_sessions(engine)
    with pytest.raises(sa.exc.DBAPIError) as lost:
        with transaction(engine) as conn:  # trusted (used just now): it fails
            conn.execute(sa.select(1)).scalar()
    assert unavailable(lost.value)  # a 503, not a 500
    with transaction(engine) as conn:  # the whole pool was dropped with it
        assert conn.execute(sa.select(1)).scalar() == 1


def test_a_taken_name_inserts_nothing_and_the_transaction_goes_on(engine):
    with transaction(engine, write=True) as conn:
        first = providers._insert(conn, _provider_values("taken"))
        assert first is not None
        assert providers._insert(conn, _provider_values("taken")) is None
        second = providers._insert(conn, _provider_values("free"))
    rp = t.resource_providers
    with transaction(engine) as conn:
        rows = conn.execute(sa.select(rp.c.id, rp.c.name, rp.c.root_provider_id)).all()
    assert sorted(rows) == [(first, "taken", first), (second, "free", second)]


@contextlib.contextmanager
def _sent(engine: sa.Engine) -> Iterator[list[str]]:
    """What the engine sends meanwhile: each statement (the COMMIT script is one)
    and each BEGIN."""
    sent: list[str] = []

    def begun(_conn) -> None:  # noqa: ANN001
        sent.append("BEGIN")

    def executed(_conn, _cursor, statement, *_rest) -> None:  # noqa: ANN001, ANN002
        sent.append(statement)

    sa.event.listen(engine, "begin", begun)
    sa.event.listen(engine, "before_cursor_execute", executed)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "begin", begun)
        sa.event.remove(engine, "before_cursor_execute", executed)


@POSTGRESQL_ONLY
def test_a_claim_for_a_new_consumer_takes_four_round_trips(api, engine, monkeypatch):
    rp = provider_with_inventory(engine, VCPU=8, MEMORY_MB=4096)
    client = api("1.39")

    def claim(consumer: str) -> int:
        allocations = {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}}
        claim_body = {
            "allocations": allocations,
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        return client.simulate_put(f"/allocations/{consumer}", json=claim_body).status_code

    assert claim(str(uuidlib.uuid4())) == 204  # (the consumer type is made once)
    monkeypatch.setattr(engine_module, "IDLE_PING_SECONDS", 3600.0)  # no ping either
    consumer = str(uuidlib.uuid4())
    with _sent(engine) as sent:
        assert claim(consumer) == 204
    # BEGIN; providers locked and bumped, classes and type looked up; inventory
    # and usage read; the consumer, allocations, history, journal and COMMIT
    assert len(sent) == 4, sent
    assert sent[-1].endswith("COMMIT")
    held = client.simulate_get(f"/allocations/{consumer}").json
    assert held["allocations"][rp]["resources"] == {"VCPU": 1, "MEMORY_MB": 512}
    assert held["consumer_generation"] == 1
    usages = client.simulate_get(f"/resource_providers/{rp}/usages").json["usages"]
    assert usages == {"VCPU": 2, "MEMORY_MB": 1024}


def _new_provider(client, parent: str | None = None) -> str:  # noqa: ANN001
    rp = str(uuidlib.uuid4())
    body = {"name": rp, "uuid": rp, "parent_provider_uuid": parent}
    made = client.simulate_post("/resource_providers", json=body)
    assert made.status == "200 OK"
    return rp


@POSTGRESQL_ONLY
def test_an_inventory_write_takes_four_round_trips(api, engine, monkeypatch):
    client = api("1.39")
    rp = _new_provider(client)
    inventories = {"VCPU": {"total": 8, "allocation_ratio": 2.5}, "DISK_GB": {"total": 100}}
    monkeypatch.setattr(engine_module, "IDLE_PING_SECONDS", 3600.0)
    with _sent(engine) as sent:
        put = client.simulate_put(
            f"/resource_providers/{rp}/inventories",
            json={"resource_provider_generation": 0, "inventories": inventories},
        )
    assert put.status_code == 200, put.text
    # BEGIN; the provider locked; classes, inventory and usage read; the records,
    # the generation, history, journal and COMMIT
    assert len(sent) == 4, sent
    listed = client.simulate_get(f"/resource_providers/{rp}/inventories").json
    assert listed["resource_provider_generation"] == 1
    assert listed["inventories"]["VCPU"]["allocation_ratio"] == 2.5
    assert listed == put.json


@POSTGRESQL_ONLY
def test_trait_and_aggregate_writes_take_four_round_trips(api, engine, monkeypatch):
    client = api("1.39")
    rp = _new_provider(client)
    aggregate = str(uuidlib.uuid4())
    monkeypatch.setattr(engine_module, "IDLE_PING_SECONDS", 3600.0)
    with _sent(engine) as sent:
        traits = client.simulate_put(
            f"/resource_providers/{rp}/traits",
            json={
                "resource_provider_generation": 0,
                "traits": ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"],
            },
        )
    assert traits.status_code == 200, traits.text
    # BEGIN; the provider locked; the traits named and held read; the links, the
    # generation, history, journal and COMMIT
    assert len(sent) == 4, sent
    with _sent(engine) as sent:  # a new aggregate's row too, in the same script
        aggregates = client.simulate_put(
            f"/resource_providers/{rp}/aggregates",
            json={"resource_provider_generation": 1, "aggregates": [aggregate]},
        )
    assert aggregates.status_code == 200, aggregates.text
    assert len(sent) == 4, sent
    shown = client.simulate_get(f"/resource_providers/{rp}/traits").json
    assert sorted(shown["traits"]) == ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"]
    shown = client.simulate_get(f"/resource_providers/{rp}/aggregates").json
    assert (shown["aggregates"], shown["resource_provider_generation"]) == ([aggregate], 2)


def _in_tree(client, rp: str) -> list[str]:  # noqa: ANN001
    listed = client.simulate_get("/resource_providers", params={"in_tree": rp})
    assert listed.status == "200 OK", listed.text
    return [p["uuid"] for p in listed.json["resource_providers"]]


@POSTGRESQL_ONLY
def test_an_index_read_at_the_current_version_opens_no_transaction(api, engine, monkeypatch):
    client, other_worker = api("1.39"), api("1.39")  # two apps: two indexes
    rp = _new_provider(client)
    assert _in_tree(client, rp) == [rp]  # the index caught up
    monkeypatch.setattr(engine_module, "IDLE_PING_SECONDS", 3600.0)
    with _sent(engine) as sent:  # the version went over the autocommit pool
        assert _in_tree(client, rp) == [rp]
    # the listing's part of the provider was kept by the first listing: nothing
    # goes over the transaction pool
    assert sent == [], sent
    child = _new_provider(other_worker, parent=rp)
    with _sent(engine) as sent:  # behind: it catches up in a read transaction
        assert _in_tree(client, rp) == [rp, child]
    assert "tally_ledger_changes" in " ".join(sent)


@POSTGRESQL_ONLY
def test_a_lost_version_connection_costs_no_error(api, engine):
    client = api("1.39")
    rp = _new_provider(client)
    assert _in_tree(client, rp) == [rp]
    readers = autocommit_reads.readers_of(engine)
    held = readers.raw_connection()
    lost_pid = held.driver_connection.info.backend_pid
    held.close()  # back to the pool, where the next read takes it
    _terminate_other_sessions(engine, lost_pid)
    child = _new_provider(client, parent=rp)
    assert _in_tree(client, rp) == [rp, child]  # read again the ordinary way
    fresh = readers.raw_connection()
    assert fresh.driver_connection.info.backend_pid != lost_pid  # the pool was renewed
    fresh.close()


@POSTGRESQL_ONLY
def test_a_failed_write_leaves_nothing_behind_and_its_connection_clean(engine):
    traits = t.traits

    def insert(conn: sa.Connection, name: str | None) -> None:
        conn.execute(traits.insert().values(name=name, created_at=utcnow()))

    with pytest.raises(sa.exc.IntegrityError):  # the first statement fails
        with transaction(engine, write=True) as conn:
            insert(conn, None)
    with pytest.raises(RuntimeError):  # the body fails after a statement
        with transaction(engine, write=True) as conn:
            insert(conn, "CUSTOM_GONE")
            raise RuntimeError("the request failed")
    with pytest.raises(sa.exc.IntegrityError):  # a later statement fails
        with transaction(engine, write=True) as conn:
            insert(conn, "CUSTOM_GONE_TOO")
            insert(conn, "CUSTOM_GONE_TOO")
    with transaction(engine) as conn:
        named = sa.select(traits.c.name).where(traits.c.name.like("CUSTOM_GONE%"))
        assert conn.execute(named).all() == []
        assert conn.connection.dbapi_connection.info.transaction_status.name == "IDLE"
    with transaction(engine, write=True) as conn:  # and the next write commits
        insert(conn, "CUSTOM_KEPT")
    with transaction(engine) as conn:
        kept = sa.select(traits.c.name).where(traits.c.name == "CUSTOM_KEPT")
        assert conn.execute(kept).scalar() == "CUSTOM_KEPT"
