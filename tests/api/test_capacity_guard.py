"""The capacity guard on inventory writes (Tally's spec, stricter than upstream).

    provider rp:  VCPU total 32         allocations: big   12 VCPU
                  DISK_GB total 100                  mid    6 VCPU, 50 DISK_GB
                                                     small  2 VCPU

`over_capacity = refuse` (default): lowering a capacity below usage is a 409
`placement.inventory.inuse` naming the usage, the capacity asked for and the
consumers. `over_capacity = allow`: written, with upstream's warning. Removing a
class that allocations hold is refused in both modes.

Allocations are written straight into the database (`allocate`), so these tests
depend only on the inventory endpoints.
"""

from __future__ import annotations

import logging
import threading
import uuid as uuidlib
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from tally.db.engine import is_sqlite
from tally.db.transaction import transaction
from tally.db.writer_queue import WriterQueue
from tally.placement.ledger.common import lock_providers, provider_row
from tests.builders import allocate, make_provider
from tests.live import wait_until

LOGGER = "tally.placement.inventory"


@pytest.fixture
def held(engine: sa.Engine, api) -> dict[str, str]:
    """The provider of the module docstring, at generation 1."""
    rp = make_provider(engine)
    body = {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 32}, "DISK_GB": {"total": 100}},
    }
    assert api().simulate_put(f"/resource_providers/{rp}/inventories", json=body).status_code == 200
    with transaction(engine, write=True) as conn:
        big = allocate(conn, rp, {"VCPU": 12}, project="proj-a")
        mid = allocate(conn, rp, {"VCPU": 6, "DISK_GB": 50}, project="proj-b", consumer_type=None)
        small = allocate(conn, rp, {"VCPU": 2}, project=None)
    return {"rp": rp, "big": big, "mid": mid, "small": small}


def put_all(client, rp, inventories, generation=1):
    body = {"resource_provider_generation": generation, "inventories": inventories}
    return client.simulate_put(f"/resource_providers/{rp}/inventories", json=body)


def put_vcpu(client, rp, generation=1, **record):
    body = {"resource_provider_generation": generation, **record}
    return client.simulate_put(f"/resource_providers/{rp}/inventories/VCPU", json=body)


def inventory(client, rp) -> dict:
    return client.simulate_get(f"/resource_providers/{rp}/inventories").json


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == "WARNING"]


# ---------------------------------------------------------------- refuse (default)


def test_shrink_below_usage_is_refused_with_the_story(api, held, caplog):
    rp = held["rp"]
    caplog.set_level(logging.WARNING, logger=LOGGER)
    result = put_all(api(), rp, {"VCPU": {"total": 16}, "DISK_GB": {"total": 100}})
    assert result.status_code == 409
    err = result.json["errors"][0]
    assert err["code"] == "placement.inventory.inuse"
    assert err["title"] == "Conflict"
    lines = err["detail"].splitlines()
    assert lines[0] == (
        f"Inventory for 'VCPU' on resource provider '{rp}' in use: 20 used, new capacity 16"
    )
    assert lines[1] == "VCPU is held by 3 consumers, largest first:"
    assert lines[2] == f"  12 by consumer {held['big']} (type INSTANCE, project proj-a)"
    assert lines[3] == f"  6 by consumer {held['mid']} (unknown type, project proj-b)"
    assert lines[4] == f"  2 by consumer {held['small']} (unknown type, unknown project)"
    assert lines[-1] == (  # what osc-placement shows: upstream's sentence, then the essentials
        f"update conflict: Inventory for 'VCPU' on resource provider '{rp}' in use. "
        f"20 used, new capacity 16, held by 3 consumers (largest {held['big']}: 12)."
    )
    assert err["usage"] == [
        {
            "resource_class": "VCPU",
            "used": 20,
            "capacity": 16,
            "removed": False,
            "consumers": [
                {
                    "uuid": held["big"],
                    "amount": 12,
                    "consumer_type": "INSTANCE",
                    "project_id": "proj-a",
                },
                {"uuid": held["mid"], "amount": 6, "consumer_type": None, "project_id": "proj-b"},
                {"uuid": held["small"], "amount": 2, "consumer_type": None, "project_id": None},
            ],
            "more_consumers": 0,
        }
    ]
    # nothing was written and the generation did not move
    after = inventory(api(), rp)
    assert after["resource_provider_generation"] == 1
    assert after["inventories"]["VCPU"]["total"] == 32
    [line] = warnings(caplog)
    assert rp in line and "VCPU 20 used, new capacity 16" in line


@pytest.mark.parametrize(
    "record",
    [
        {"total": 19},
        {"total": 32, "reserved": 13},
        {"total": 32, "allocation_ratio": 0.6},  # int(32 * 0.6) = 19
    ],
)
def test_every_way_of_lowering_capacity_counts(api, held, record):
    result = put_vcpu(api(), held["rp"], **record)
    assert result.status_code == 409
    assert result.json["errors"][0]["usage"][0]["capacity"] == 19
    assert inventory(api(), held["rp"])["inventories"]["VCPU"]["total"] == 32


@pytest.mark.parametrize("record", [{"total": 20}, {"total": 10, "allocation_ratio": 2.0}])
def test_shrink_down_to_usage_is_fine(api, held, record):
    result = put_vcpu(api(), held["rp"], **record)
    assert result.status_code == 200
    assert result.json["resource_provider_generation"] == 2


def test_several_classes_short_at_once(api, held):
    rp = held["rp"]
    result = put_all(api("1.22"), rp, {"VCPU": {"total": 8}, "DISK_GB": {"total": 40}})
    assert result.status_code == 409
    err = result.json["errors"][0]
    assert "code" not in err  # codes from 1.23; the usage member is there anyway
    assert err["detail"].splitlines()[0] == (
        f"Inventory for 'VCPU, DISK_GB' on resource provider '{rp}' in use: "
        "VCPU 20 used, new capacity 8; DISK_GB 50 used, new capacity 40"
    )
    assert err["detail"].splitlines()[-1] == (
        f"update conflict: Inventory for 'VCPU, DISK_GB' on resource provider '{rp}' in use. "
        f"VCPU 20 used, new capacity 8, held by 3 consumers (largest {held['big']}: 12); "
        f"DISK_GB 50 used, new capacity 40, held by 1 consumer (largest {held['mid']}: 50)."
    )
    assert [u["resource_class"] for u in err["usage"]] == ["VCPU", "DISK_GB"]
    assert err["usage"][1]["consumers"][0]["uuid"] == held["mid"]


def test_many_consumers_are_capped(api, engine):
    rp = make_provider(engine)
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 100}}}
    api().simulate_put(f"/resource_providers/{rp}/inventories", json=body)
    with transaction(engine, write=True) as conn:
        for amount in range(1, 18):  # 17 consumers holding 1..17
            allocate(conn, rp, {"VCPU": amount})
    result = put_vcpu(api(), rp, total=100, reserved=90)
    assert result.status_code == 409
    err = result.json["errors"][0]
    lines = err["detail"].splitlines()
    assert lines[0].endswith("in use: 153 used, new capacity 10")
    assert lines[1] == "VCPU is held by 17 consumers, largest first:"
    assert [int(line.split()[0]) for line in lines[2:7]] == [17, 16, 15, 14, 13]
    assert lines[7] == "  and 12 more consumers"
    usage = err["usage"][0]
    assert [c["amount"] for c in usage["consumers"]] == [17, 16, 15, 14, 13]
    assert usage["more_consumers"] == 12


def test_a_provider_already_over_capacity_can_be_repaired(api, held, caplog):
    """Raising a capacity that is still below usage is not refused (it does not
    make things worse); it is logged."""
    rp = held["rp"]
    assert put_vcpu(api(over_capacity="allow"), rp, total=10).status_code == 200
    caplog.clear()
    result = put_vcpu(api(), rp, generation=2, total=15)
    assert result.status_code == 200
    assert warnings(caplog) == [f"Resource provider {rp} is now over-capacity for VCPU"]
    # but lowering it further is refused
    assert put_vcpu(api(), rp, generation=3, total=12).status_code == 409
    # and untouched over-capacity classes do not block other changes
    other = put_all(api(), rp, {"VCPU": {"total": 15}, "DISK_GB": {"total": 200}}, generation=3)
    assert other.status_code == 200


def test_post_of_a_new_class_is_never_refused(api, engine):
    """Allocations without inventory (left by some old bug) do not block adding
    the inventory: adding can only raise capacity."""
    rp = make_provider(engine)
    with transaction(engine, write=True) as conn:
        allocate(conn, rp, {"MEMORY_MB": 4096})
    result = api().simulate_post(
        f"/resource_providers/{rp}/inventories", json={"resource_class": "MEMORY_MB", "total": 1024}
    )
    assert result.status_code == 201


# ---------------------------------------------------------------- removal (both modes)


@pytest.mark.parametrize("mode", ["refuse", "allow"])
def test_removing_a_held_class_is_refused(api, held, mode, caplog):
    rp = held["rp"]
    client = api("1.23", over_capacity=mode)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    delete_all = api("1.5", over_capacity=mode).simulate_delete(
        f"/resource_providers/{rp}/inventories"
    )
    assert delete_all.status_code == 409
    all_lines = delete_all.json["errors"][0]["detail"].splitlines()
    assert all_lines[0].startswith(f"Inventory for 'VCPU, DISK_GB' on resource provider '{rp}'")
    assert all_lines[-1].startswith(
        f"Inventory for 'VCPU, DISK_GB' on resource provider '{rp}' in use. VCPU 20 used, "
        "the inventory cannot be removed, held by 3 consumers (largest "
    )
    put_empty = put_all(client, rp, {})
    assert put_empty.status_code == 409
    assert put_empty.json["errors"][0]["code"] == "placement.inventory.inuse"
    usage = put_empty.json["errors"][0]["usage"]
    assert [(u["resource_class"], u["used"], u["removed"]) for u in usage] == [
        ("VCPU", 20, True),
        ("DISK_GB", 50, True),
    ]
    delete_one = client.simulate_delete(f"/resource_providers/{rp}/inventories/DISK_GB")
    assert delete_one.status_code == 409
    err = delete_one.json["errors"][0]
    assert err["code"] == "placement.inventory.inuse"
    assert err["detail"].splitlines()[0] == (
        f"Inventory for 'DISK_GB' on resource provider '{rp}' in use: "
        "50 used, the inventory cannot be removed"
    )
    assert err["detail"].splitlines()[-1] == (
        f"Unable to delete inventory of class DISK_GB: Inventory for 'DISK_GB' on resource "
        f"provider '{rp}' in use. 50 used, the inventory cannot be removed, held by 1 "
        f"consumer (largest {held['mid']}: 50)."
    )
    assert len(warnings(caplog)) == 3
    assert inventory(client, rp)["resource_provider_generation"] == 1


def test_removing_a_free_class_is_fine(api, engine):
    rp = make_provider(engine)
    body = {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}},
    }
    api().simulate_put(f"/resource_providers/{rp}/inventories", json=body)
    with transaction(engine, write=True) as conn:
        allocate(conn, rp, {"VCPU": 4})
    result = put_all(api(), rp, {"VCPU": {"total": 8}})
    assert result.status_code == 200
    assert set(result.json["inventories"]) == {"VCPU"}


def test_mixed_refusal_lists_removal_and_shrink(api, held):
    result = put_all(api(), held["rp"], {"VCPU": {"total": 4}})
    usage = result.json["errors"][0]["usage"]
    assert [(u["resource_class"], u["capacity"], u["removed"]) for u in usage] == [
        ("VCPU", 4, False),
        ("DISK_GB", 0, True),
    ]


# ---------------------------------------------------------------- allow (upstream)


def test_allow_writes_the_shrink_and_warns(api, held, caplog):
    rp = held["rp"]
    caplog.set_level(logging.WARNING, logger=LOGGER)
    client = api(over_capacity="allow")
    result = put_all(client, rp, {"VCPU": {"total": 16}, "DISK_GB": {"total": 49}})
    assert result.status_code == 200
    assert result.json["resource_provider_generation"] == 2
    assert result.json["inventories"]["VCPU"]["total"] == 16
    assert sorted(warnings(caplog)) == [
        f"Resource provider {rp} is now over-capacity for DISK_GB",
        f"Resource provider {rp} is now over-capacity for VCPU",
    ]
    caplog.clear()
    assert put_vcpu(client, rp, generation=2, total=8).status_code == 200
    assert warnings(caplog) == [f"Resource provider {rp} is now over-capacity for VCPU"]


def test_allow_still_refuses_removal_but_not_the_shrink(api, held):
    result = put_all(api(over_capacity="allow"), held["rp"], {"VCPU": {"total": 4}})
    assert result.status_code == 409
    usage = result.json["errors"][0]["usage"]
    assert [u["resource_class"] for u in usage] == ["DISK_GB"]


# ---------------------------------------------------------------- one transaction


def waiting_for_a_lock(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> Callable[[], bool]:
    """Asked from the thread of a writer holding a lock: whether a request of this
    thread (the test's) is waiting for it. SQLite: it asked for its turn in the
    writer queue, which the writer holds; PostgreSQL and MySQL: the server shows a
    session of this database waiting for a lock."""
    if is_sqlite(engine):
        asked, request_thread = threading.Event(), threading.get_ident()
        real_turn = WriterQueue.turn

        def turn(queue: WriterQueue):  # noqa: ANN202
            if threading.get_ident() == request_thread:
                asked.set()
            return real_turn(queue)

        monkeypatch.setattr(WriterQueue, "turn", turn)
        return asked.is_set
    sql = LOCK_WAITS[engine.dialect.name]

    def waiting() -> bool:
        with engine.connect() as conn:
            return conn.exec_driver_sql(sql).scalar() > 0

    return waiting


LOCK_WAITS = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND wait_event_type = 'Lock'",
    # (a session of this database inside a locking read, the lock being the claim's;
    # innodb_trx's LOCK WAIT state showed late or not at all in one run of three)
    "mysql": "SELECT count(*) FROM information_schema.processlist"
    " WHERE db = DATABASE() AND id <> CONNECTION_ID() AND command = 'Query'"
    " AND LOCATE('FOR UPDATE', info) > 0",
}


def test_guard_sees_a_claim_that_commits_while_it_waits(api, held, engine, monkeypatch):
    """An allocation writer holding the provider lock: the shrink waits for it
    and then counts its allocation (SQLite: one writer; PostgreSQL: row lock).
    The writer commits only once the shrink is seen waiting for its lock."""
    rp = held["rp"]
    client = api()
    shrink_waits = waiting_for_a_lock(engine, monkeypatch)
    locked = threading.Event()
    seen_waiting: list[bool] = []

    def claim() -> None:
        with transaction(engine, write=True) as conn:
            lock_providers(conn, [provider_row(conn, rp).id])
            allocate(conn, rp, {"VCPU": 10})
            locked.set()
            seen_waiting.append(wait_until(shrink_waits))  # then commit

    writer = threading.Thread(target=claim)
    writer.start()
    assert locked.wait(10)
    result = put_vcpu(client, rp, total=25)  # 20 used before the claim, 30 after
    writer.join()
    assert seen_waiting == [True], "the shrink did not wait for the claim's lock"
    assert result.status_code == 409, result.text
    assert result.json["errors"][0]["usage"][0]["used"] == 30


def test_guard_names_consumers_claimed_over_http(api, engine):
    """The same story with allocations written by PUT /allocations (1.38:
    consumer types)."""
    rp = make_provider(engine)
    client = api("1.38")
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}
    assert (
        client.simulate_put(f"/resource_providers/{rp}/inventories", json=body).status_code == 200
    )
    consumer = str(uuidlib.uuid4())
    claim = {
        "allocations": {rp: {"resources": {"VCPU": 6}}},
        "project_id": "proj-x",
        "user_id": "user-x",
        "consumer_generation": None,
        "consumer_type": "MIGRATION",
    }
    assert client.simulate_put(f"/allocations/{consumer}", json=claim).status_code == 204
    result = put_vcpu(client, rp, generation=2, total=4)
    assert result.status_code == 409
    [usage] = result.json["errors"][0]["usage"]
    assert usage["consumers"] == [
        {"uuid": consumer, "amount": 6, "consumer_type": "MIGRATION", "project_id": "proj-x"}
    ]
    assert (
        put_vcpu(api("1.38", over_capacity="allow"), rp, generation=2, total=4).status_code == 200
    )
