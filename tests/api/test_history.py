"""The claim history, GET /tally/v1/history: every write path records exactly one row
per change it makes, in its own transaction (a refused, rolled-back or retried write
leaves none of its attempts behind), with the request that made it; admin only;
filters and pages; retention. On every backend of the suite.

The world most tests build (all through the API, as admin):

    host (RP)    VCPU 8, MEMORY_MB 4096          <- VM holds VCPU 2, MEMORY_MB 512
      numa (CHILD)                                   (made where a test needs a tree)
    other (OTHER) VCPU 4
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import notes, transaction
from tally.placement.ledger import allocations as ledger_allocations
from tally.placement.ledger import history_records as ledger_history

PATH = "/tally/v1/history"
PROJECT, USER = "proj-a", "user-a"


def new_uuid() -> str:
    return str(uuid.uuid4())


class Book:
    """The API as admin, and the history rows written since the last look."""

    def __init__(self, client) -> None:
        self.client = client
        self.seen = max((r["id"] for r in self.rows()), default=0)

    def rows(self, **params: str) -> list[dict]:
        found = self.client.simulate_get(PATH, params={"limit": "1000", **params})
        assert found.status_code == 200, found.text
        return found.json["history"]

    def new(self) -> list[dict]:
        """Rows written since the last call, oldest first."""
        fresh = sorted((r for r in self.rows() if r["id"] > self.seen), key=lambda r: r["id"])
        self.seen = max([self.seen, *(r["id"] for r in fresh)])
        return fresh

    def changes(self) -> list[tuple]:
        """The new rows as (action, consumer, provider, class, before, after), sorted."""
        return sorted(
            (
                r["action"],
                r["consumer"] or "",
                r["provider"] or "",
                r["resource_class"] or "",
                r["before"],
                r["after"],
            )
            for r in self.new()
        )

    # ------------------------------------------------------------ writes

    def provider(self, name: str, parent: str | None = None) -> str:
        rp = new_uuid()
        body = {"uuid": rp, "name": name, "parent_provider_uuid": parent}
        assert self.client.simulate_post("/resource_providers", json=body).status_code == 200
        return rp

    def generation(self, rp: str) -> int:
        return self.client.simulate_get(f"/resource_providers/{rp}").json["generation"]

    def inventories(self, rp: str, status: int = 200, **totals: int | dict):
        inventories = {rc: v if isinstance(v, dict) else {"total": v} for rc, v in totals.items()}
        body = {"resource_provider_generation": self.generation(rp), "inventories": inventories}
        found = self.client.simulate_put(f"/resource_providers/{rp}/inventories", json=body)
        assert found.status_code == status, found.text
        return found

    def claim(self, consumer: str, held: dict, status: int = 204, **headers: str):
        current = self.client.simulate_get(f"/allocations/{consumer}").json
        body = {
            "allocations": {rp: {"resources": res} for rp, res in held.items()},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": current.get("consumer_generation"),
            "consumer_type": "INSTANCE",
        }
        found = self.client.simulate_put(f"/allocations/{consumer}", json=body, headers=headers)
        assert found.status_code == status, found.text
        return found


@pytest.fixture
def book(api) -> Book:
    return Book(api())


@pytest.fixture
def world(book: Book) -> dict[str, str]:
    rp, other = book.provider("host"), book.provider("other")
    book.inventories(rp, VCPU=8, MEMORY_MB=4096)
    book.inventories(other, VCPU=4)
    vm = new_uuid()
    book.claim(vm, {rp: {"VCPU": 2, "MEMORY_MB": 512}})
    book.new()
    return {"rp": rp, "other": other, "vm": vm}


# ---------------------------------------------------------------- one row per change


def test_provider_create_update_and_delete(book):
    host = book.provider("host")
    (created,) = book.new()
    assert (created["action"], created["provider"]) == ("provider.create", host)
    assert created["detail"] == {"before": None, "after": {"name": "host", "parent": None}}
    assert created["provider_generation"] == 0

    numa = book.provider("numa", parent=host)
    assert book.new()[0]["detail"]["after"] == {"name": "numa", "parent": host}

    same = book.client.simulate_put(f"/resource_providers/{numa}", json={"name": "numa"})
    assert same.status_code == 200 and book.new() == []  # nothing changed: no row
    body = {"name": "numa-0", "parent_provider_uuid": host}
    assert book.client.simulate_put(f"/resource_providers/{numa}", json=body).status_code == 200
    (renamed,) = book.new()
    assert renamed["action"] == "provider.update"
    assert renamed["detail"] == {
        "before": {"name": "numa", "parent": host},
        "after": {"name": "numa-0", "parent": host},
    }
    other = book.provider("other")
    book.new()
    body = {"name": "numa-0", "parent_provider_uuid": other}
    assert book.client.simulate_put(f"/resource_providers/{numa}", json=body).status_code == 200
    (moved,) = book.new()  # a re-parent (1.37): one row, for the provider moved
    assert moved["detail"]["before"]["parent"] == host
    assert moved["detail"]["after"]["parent"] == other

    book.inventories(numa, VCPU=4)
    put = {"traits": ["HW_CPU_X86_AVX"], "resource_provider_generation": book.generation(numa)}
    book.client.simulate_put(f"/resource_providers/{numa}/traits", json=put)
    aggregate = new_uuid()
    put = {"aggregates": [aggregate], "resource_provider_generation": book.generation(numa)}
    book.client.simulate_put(f"/resource_providers/{numa}/aggregates", json=put)
    book.new()
    assert book.client.simulate_delete(f"/resource_providers/{numa}").status_code == 204
    (deleted,) = book.new()
    assert (deleted["action"], deleted["provider"]) == ("provider.delete", numa)
    assert deleted["detail"] == {
        "before": {
            "name": "numa-0",
            "parent": other,
            "inventories": {"VCPU": 4},
            "traits": ["HW_CPU_X86_AVX"],
            "aggregates": [aggregate],
        },
        "after": None,
    }


def test_inventory_writes(book):
    rp = book.provider("host")
    book.new()
    book.inventories(rp, VCPU=8, MEMORY_MB=4096)
    assert book.changes() == [
        ("inventory", "", rp, "MEMORY_MB", None, 4096),
        ("inventory", "", rp, "VCPU", None, 8),
    ]
    book.inventories(rp, VCPU=8, MEMORY_MB=4096)  # the same again: the generation moves
    assert book.new() == []

    body = {"resource_provider_generation": book.generation(rp), "total": 8, "reserved": 2}
    found = book.client.simulate_put(f"/resource_providers/{rp}/inventories/VCPU", json=body)
    assert found.status_code == 200, found.text
    (changed,) = book.new()
    assert (changed["before"], changed["after"]) == (8, 8)
    assert changed["detail"]["before"]["reserved"] == 0
    assert changed["detail"]["after"]["reserved"] == 2
    assert changed["provider_generation"] == found.json["resource_provider_generation"]

    body = {"resource_class": "DISK_GB", "total": 100, "resource_provider_generation": 3}
    assert (
        book.client.simulate_post(f"/resource_providers/{rp}/inventories", json=body).status_code
        == 201
    )
    assert book.changes() == [("inventory", "", rp, "DISK_GB", None, 100)]
    assert (
        book.client.simulate_delete(f"/resource_providers/{rp}/inventories/DISK_GB").status_code
        == 204
    )
    assert book.changes() == [("inventory", "", rp, "DISK_GB", 100, None)]
    assert book.client.simulate_delete(f"/resource_providers/{rp}/inventories").status_code == 204
    assert book.changes() == [
        ("inventory", "", rp, "MEMORY_MB", 4096, None),
        ("inventory", "", rp, "VCPU", 8, None),
    ]


def test_traits_and_aggregates(book):
    rp = book.provider("host")
    book.new()
    path = f"/resource_providers/{rp}/traits"
    body = {"traits": ["HW_CPU_X86_AVX", "HW_CPU_X86_SSE"], "resource_provider_generation": 0}
    assert book.client.simulate_put(path, json=body).status_code == 200
    (row,) = book.new()
    assert row["action"] == "traits" and row["provider_generation"] == 1
    assert row["detail"] == {"added": ["HW_CPU_X86_AVX", "HW_CPU_X86_SSE"], "removed": []}
    body["resource_provider_generation"] = 1
    assert book.client.simulate_put(path, json=body).status_code == 200
    assert book.new() == []  # the same set: nothing changed
    assert book.client.simulate_delete(path).status_code == 204
    assert book.new()[0]["detail"] == {
        "added": [],
        "removed": ["HW_CPU_X86_AVX", "HW_CPU_X86_SSE"],
    }

    a, b = new_uuid(), new_uuid()
    path = f"/resource_providers/{rp}/aggregates"
    for wanted, added, removed in (([a, b], sorted([a, b]), []), ([b], [], [a])):
        body = {"aggregates": wanted, "resource_provider_generation": book.generation(rp)}
        assert book.client.simulate_put(path, json=body).status_code == 200
        (row,) = book.new()
        assert row["action"] == "aggregates"
        assert row["detail"] == {"added": added, "removed": removed}


def test_allocation_writes(book, world):
    rp, other, vm = world["rp"], world["other"], world["vm"]
    found = book.claim(vm, {rp: {"VCPU": 2, "MEMORY_MB": 1024}})  # memory grows
    (row,) = book.new()
    assert (row["action"], row["consumer"], row["provider"]) == ("allocation", vm, rp)
    assert (row["resource_class"], row["before"], row["after"]) == ("MEMORY_MB", 512, 1024)
    assert (row["consumer_project_id"], row["consumer_user_id"]) == (PROJECT, USER)
    assert (row["consumer_type"], row["consumer_generation"]) == ("INSTANCE", 2)
    assert row["provider_generation"] == book.generation(rp)
    assert row["request_id"] == found.headers["openstack-request-id"]

    book.claim(vm, {other: {"VCPU": 2}})  # moved to the other host
    assert book.changes() == sorted(
        [
            ("allocation", vm, other, "VCPU", None, 2),
            ("allocation", vm, rp, "MEMORY_MB", 1024, None),
            ("allocation", vm, rp, "VCPU", 2, None),
        ]
    )
    book.claim(vm, {other: {"VCPU": 2}})  # the same again: no row
    assert book.new() == []

    second = new_uuid()
    body = {
        vm: {
            "allocations": {other: {"resources": {"VCPU": 1}}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": 4,
            "consumer_type": "INSTANCE",
        },
        second: {
            "allocations": {rp: {"resources": {"VCPU": 3}}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": None,
            "consumer_type": "MIGRATION",
        },
    }
    done = book.client.simulate_post("/allocations", json=body)
    assert done.status_code == 204, done.text
    rows = book.new()
    assert sorted((r["consumer"], r["before"], r["after"]) for r in rows) == sorted(
        [(vm, 2, 1), (second, None, 3)]
    )
    assert len({r["request_id"] for r in rows}) == 1  # one request, one transaction
    assert {r["consumer"]: r["consumer_type"] for r in rows}[second] == "MIGRATION"

    assert book.client.simulate_delete(f"/allocations/{second}").status_code == 204
    (gone,) = book.new()
    assert (gone["consumer"], gone["before"], gone["after"]) == (second, 3, None)
    assert (gone["consumer_type"], gone["consumer_generation"]) == ("MIGRATION", None)

    emptied = {**body[vm], "allocations": {}, "consumer_generation": 5}
    assert book.client.simulate_post("/allocations", json={vm: emptied}).status_code == 204
    assert book.changes() == [("allocation", vm, other, "VCPU", 1, None)]


def test_a_reshape_records_what_changed_from_start_to_end(book, world):
    rp, vm = world["rp"], world["vm"]
    child = book.provider("pgpu", parent=rp)
    book.inventories(rp, VCPU=8, MEMORY_MB=4096, VGPU=4)
    book.claim(vm, {rp: {"VCPU": 2, "MEMORY_MB": 512, "VGPU": 1}})
    book.new()
    body = {
        "inventories": {
            rp: {
                "resource_provider_generation": book.generation(rp),
                "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}},
            },
            child: {"resource_provider_generation": 0, "inventories": {"VGPU": {"total": 4}}},
        },
        "allocations": {
            vm: {
                "allocations": {
                    rp: {"resources": {"VCPU": 2, "MEMORY_MB": 512}},
                    child: {"resources": {"VGPU": 1}},
                },
                "project_id": PROJECT,
                "user_id": USER,
                "consumer_generation": 2,
                "consumer_type": "INSTANCE",
            }
        },
    }
    done = book.client.simulate_post("/reshaper", json=body)
    assert done.status_code == 204, done.text
    # VCPU and MEMORY_MB went through an interim union and back: no rows of their own
    assert book.changes() == sorted(
        [
            ("allocation", vm, child, "VGPU", None, 1),
            ("allocation", vm, rp, "VGPU", 1, None),
            ("inventory", "", child, "VGPU", None, 4),
            ("inventory", "", rp, "VGPU", 4, None),
        ]
    )


# ---------------------------------------------------------------- refusals leave nothing


def test_refused_writes_leave_no_row(book, world, engine):
    rp, vm = world["rp"], world["vm"]
    before = book.rows()
    book.claim(new_uuid(), {rp: {"VCPU": 100}}, status=409)  # over capacity
    body = {
        "allocations": {rp: {"resources": {"VCPU": 1}}},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": 7,  # stale
        "consumer_type": "INSTANCE",
    }
    assert book.client.simulate_put(f"/allocations/{vm}", json=body).status_code == 409
    book.claim(new_uuid(), {rp: {"CUSTOM_NONE": 1}}, status=400)
    book.inventories(rp, status=409, VCPU=1, MEMORY_MB=4096)  # below usage: in use
    stale = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 9}}}
    assert (
        book.client.simulate_put(f"/resource_providers/{rp}/inventories", json=stale).status_code
        == 409
    )
    assert book.client.simulate_delete(f"/resource_providers/{rp}").status_code == 409
    traits = {"traits": ["HW_CPU_X86_AVX"], "resource_provider_generation": 0}
    assert (
        book.client.simulate_put(f"/resource_providers/{rp}/traits", json=traits).status_code == 409
    )
    assert book.client.simulate_delete(f"/allocations/{new_uuid()}").status_code == 404
    assert book.rows() == before


def test_a_rolled_back_transaction_leaves_no_row(book, world, engine):
    write = ledger_allocations.ConsumerWrite(
        new_uuid(), PROJECT, USER, {world["rp"]: {"VCPU": 1}}, consumer_type="INSTANCE"
    )
    with pytest.raises(RuntimeError), transaction(engine, write=True) as conn:
        ledger_allocations.replace_in(conn, [write])
        assert notes(conn, "history", dict, lambda *_: None)  # noted, not yet written
        raise RuntimeError("the caller gave up")
    assert book.new() == []
    with transaction(engine, write=True) as conn:  # the same connection, maybe: clean
        assert notes(conn, "history", dict, lambda *_: None) == {}


def test_a_write_run_again_after_a_race_records_its_last_run_only(book, world, monkeypatch):
    lost = []
    real = ledger_allocations._check

    def loses_once(conn, writes, *args):
        if not lost:
            lost.append([w.uuid for w in writes])
            raise ledger_allocations.provider_bumps.GenerationMoved()
        return real(conn, writes, *args)

    monkeypatch.setattr(ledger_allocations, "_check", loses_once)
    consumer = new_uuid()
    book.claim(consumer, {world["rp"]: {"VCPU": 1}})
    assert len(lost) == 1  # the first run lost, the server ran it again
    assert book.changes() == [("allocation", consumer, world["rp"], "VCPU", None, 1)]


# ---------------------------------------------------------------- who asked


def test_the_caller_is_recorded(book, world):
    nova = {"x-auth-token": "nova", "x-roles": "service", "x-project-id": "service"}
    inbound = f"req-{uuid.uuid4()}"
    consumer = new_uuid()
    found = book.claim(
        consumer, {world["rp"]: {"VCPU": 1}}, **nova, **{"x-openstack-request-id": inbound}
    )
    (row,) = book.new()
    assert row["request_id"] == found.headers["openstack-request-id"] != inbound
    assert row["global_request_id"] == inbound
    assert (row["user_id"], row["project_id"]) == ("nova", "service")
    assert row["time"].endswith("Z")
    book.claim(consumer, {world["rp"]: {"VCPU": 2}}, **{"x-openstack-request-id": "nope"})
    assert book.new()[0]["global_request_id"] is None  # not of the form req-<uuid>


def test_any_text_is_recorded_as_sent(book, world):
    # PostgreSQL gets the rows written into the script sent with the COMMIT: the
    # driver's quoting must carry every character as it came
    odd = "o'brien\\x27; DROP TABLE x;--\"%s %(a)s\u00fc\U0001f600\t"
    consumer = new_uuid()
    body = {
        "allocations": {
            world["rp"]: {"resources": {"VCPU": 1}},
            world["other"]: {"resources": {"VCPU": 1}},
        },
        "project_id": odd,
        "user_id": odd[::-1],
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert book.client.simulate_put(f"/allocations/{consumer}", json=body).status_code == 204
    rows = book.new()
    assert len(rows) == 2
    assert {(r["consumer_project_id"], r["consumer_user_id"]) for r in rows} == {(odd, odd[::-1])}


def test_amounts_sent_as_whole_floats_are_recorded_as_integers(book, world):
    # JSON's 3.0 is a valid integer: written, and recorded, as 3
    rp, consumer = world["other"], new_uuid()
    book.inventories(rp, VCPU={"total": 8.0, "reserved": 1.0})
    book.claim(consumer, {rp: {"VCPU": 3.0}})
    assert book.changes() == sorted(
        [
            ("inventory", "", rp, "VCPU", 4, 8),
            ("allocation", consumer, rp, "VCPU", None, 3),
        ]
    )
    assert book.client.simulate_get(f"/resource_providers/{rp}/usages").json["usages"] == {
        "VCPU": 3
    }


def test_with_history_off_nothing_is_recorded(api, world, book):
    quiet = Book(api(history=False))
    quiet.claim(new_uuid(), {world["rp"]: {"VCPU": 1}})
    quiet.inventories(world["other"], VCPU=6)
    assert book.new() == []


def test_every_claim_of_concurrent_writers_is_recorded_once(api, engine):
    book = Book(api())
    rp = book.provider("big")
    book.inventories(rp, VCPU=100, MEMORY_MB=100_000)
    book.new()
    made: list[str] = []

    def claims() -> None:
        own = Book(api())
        for _ in range(5):
            consumer = new_uuid()
            own.claim(consumer, {rp: {"VCPU": 1, "MEMORY_MB": 64}})
            made.append(consumer)

    threads = [threading.Thread(target=claims) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = book.new()
    assert len(made) == 20
    assert sorted((r["consumer"], r["resource_class"]) for r in rows) == sorted(
        (c, rc) for c in made for rc in ("MEMORY_MB", "VCPU")
    )


# ---------------------------------------------------------------- reading


def test_filters_and_pages(book, world):
    other, vm = world["other"], world["vm"]
    book.claim(vm, {other: {"VCPU": 1}})
    mine = book.rows(consumer=vm)
    assert {r["consumer"] for r in mine} == {vm} and len(mine) == 5  # 2 claimed, 3 moved
    assert [r["id"] for r in mine] == sorted((r["id"] for r in mine), reverse=True)
    assert {r["provider"] for r in book.rows(provider=other)} == {other}
    assert book.rows(consumer=vm, provider=other)[0]["after"] == 1

    pages, marker = [], None
    while True:
        params = {"consumer": vm, "limit": "2", **({"marker": marker} if marker else {})}
        page = book.client.simulate_get(PATH, params=params).json
        pages.append([r["id"] for r in page["history"]])
        marker = page["next_marker"]
        if marker is None:
            break
    assert [n for page in pages for n in page] == [r["id"] for r in mine]
    assert [len(page) for page in pages] == [2, 2, 1]

    newest = dt.datetime.fromisoformat(mine[0]["time"])
    later = (newest + dt.timedelta(seconds=1)).isoformat()
    assert book.rows(consumer=vm, since=later) == []
    assert len(book.rows(consumer=vm, until=later)) == 5
    assert book.rows(consumer=vm, since=mine[0]["time"])[0]["id"] == mine[0]["id"]
    assert book.rows(consumer=vm, until="2000-01-01") == []
    assert len(book.rows(consumer=vm, since="2000-01-01T00:00:00+05:00")) == 5
    assert book.rows(consumer=new_uuid()) == []


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("limit=0", "placement.undefined_code"),
        ("limit=ten", "placement.undefined_code"),
        ("consumer=not-a-uuid", "placement.undefined_code"),
        ("since=yesterday", "placement.undefined_code"),
        ("since=2026-02-30", "placement.query.bad_value"),
        ("marker=-1", "placement.undefined_code"),
        ("colour=blue", "placement.undefined_code"),
        ("limit=1&limit=2", "placement.query.duplicate_key"),
    ],
)
def test_bad_queries_are_a_placement_400(book, query, code):
    found = book.client.simulate_get(PATH, query_string=query)
    assert found.status_code == 400, found.text
    (error,) = found.json["errors"]
    assert error["code"] == code
    assert error["request_id"] == found.headers["openstack-request-id"]


def test_only_an_admin_reads_it(book):
    for who in (
        {"x-auth-token": "nova", "x-roles": "service", "x-project-id": "service"},
        {"x-auth-token": "alice", "x-roles": "member,reader", "x-project-id": PROJECT},
    ):
        found = book.client.simulate_get(PATH, headers=who)
        assert found.status_code == 403
        detail = found.json["errors"][0]["detail"]
        assert detail == "Policy does not allow tally:history:list to be performed."
    assert book.client.simulate_get(PATH, headers={"x-auth-token": ""}).status_code == 401


def test_a_large_limit_gives_at_most_a_thousand(book, world):
    found = book.client.simulate_get(PATH, params={"limit": "999999999"})
    assert found.status_code == 200 and found.json["next_marker"] is None


# ---------------------------------------------------------------- retention


def _rows_at(engine, *ages_days: float) -> None:
    """History rows written `ages_days` ago, oldest first."""
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    with transaction(engine, write=True) as conn:
        conn.execute(
            t.history.insert(),
            [
                {"created_at": now - dt.timedelta(days=age), "action": "traits"}
                for age in sorted(ages_days, reverse=True)
            ],
        )


def _count(engine) -> int:
    with transaction(engine) as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(t.history)).scalar()


def test_pruning_by_age_and_by_rows_in_small_batches(engine):
    _rows_at(engine, *[100.0] * 7, *[10.0] * 5)
    assert ledger_history.prune(engine, keep_days=0, keep_rows=0) == 0  # no limits
    assert ledger_history.prune(engine, keep_days=30, keep_rows=0, batch=3) == 3
    assert ledger_history.prune(engine, keep_days=30, keep_rows=0, batch=3) == 3
    assert ledger_history.prune(engine, keep_days=30, keep_rows=0, batch=3) == 1
    assert ledger_history.prune(engine, keep_days=30, keep_rows=0, batch=3) == 0
    assert _count(engine) == 5
    assert ledger_history.prune(engine, keep_days=0, keep_rows=2, batch=2) == 2
    assert ledger_history.prune(engine, keep_days=0, keep_rows=2, batch=2) == 1
    assert _count(engine) == 2


def test_the_pruner_runs_now_and_then_in_a_thread_of_its_own(engine):
    _rows_at(engine, *[200.0] * (ledger_history.BATCH + 10), 1.0)
    pruner = ledger_history.Pruner(engine, keep_days=90, keep_rows=0, every=3600)
    assert pruner.poke() is None  # not due yet
    pruner.due = 0
    thread = pruner.poke()
    assert thread is not None and pruner.poke() is None  # one pass at a time
    thread.join(timeout=30)
    assert _count(engine) == 1
    assert pruner.running.acquire(blocking=False)  # released after the pass


def test_writes_poke_the_pruner(api, world, engine):
    client = api(history_keep_days=1, history_prune_seconds=0)  # its pruner is due at once
    _rows_at(engine, 30.0)
    Book(client).claim(new_uuid(), {world["rp"]: {"VCPU": 1}})
    deadline = time.monotonic() + 30
    while _old_rows(engine) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _old_rows(engine) == 0


def _old_rows(engine) -> int:
    cutoff = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(days=2)
    with transaction(engine) as conn:
        query = sa.select(sa.func.count()).select_from(t.history)
        return conn.execute(query.where(t.history.c.created_at < cutoff)).scalar()
