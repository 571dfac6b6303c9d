"""`tally drain HOST --what-if` predicts the real drain (issue 41): on seeded lab
layouts with some hosts nearly full, the prediction writes nothing and says which
servers would move where and which would fail and why; the real `--apply` then
refuses naming the same servers for the same reason, writing nothing. The operator
makes room as the prediction suggests (deletes a failing server, or frees room for
it on the host with the most free memory), asks again until the prediction drains
the host, and drains it for real: every server where the prediction said, what
stays on the host, and every host's usage after as predicted (each within capacity).
Each seed goes through both: refused, then drained.

    cmp-1 (drained)  servers of 1 to 8 VCPU, full
    cmp-2 .. cmp-N   8 to 16 VCPU each, filled at random, one disabled now and then
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.main import cli
from tally.doctor import drain as doctor
from tests.lab.conftest import InProcessLab

DRAINED = "cmp-1"
FLAVORS = {"f1": (1, 2048), "f2": (2, 4096), "f4": (4, 8192), "f8": (8, 8192)}
SEEDS = range(5)
MAX_ROUNDS = 5  # of making room, before the prediction drains the host
NO_ROOM = "no other enabled host has room for server"


def tally(lab: InProcessLab, *args: str) -> Result:
    context = Context.for_client(lab.placement)
    context.compute = lab.compute
    return CliRunner().invoke(cli, list(args), obj=context)


def layout(lab: InProcessLab, seed: int) -> None:
    """Hosts of random sizes, each filled with random flavors (pinned to it) until
    a random share of its VCPU or memory is used, cmp-1 until full; a host
    disabled now and then."""
    rng = random.Random(seed)
    for name, (vcpus, ram) in FLAVORS.items():
        lab.flavor(name, vcpus=vcpus, ram=ram, disk=10)
    names = [f"cmp-{i}" for i in range(1, rng.randint(4, 6) + 1)]
    for name in names:
        lab.hosts(
            name,
            vcpus=rng.choice([8, 12, 16]),
            memory_mb=rng.choice([16384, 32768, 49152]),
            cpu_allocation_ratio=1.0,
        )
    for name in names:
        share = 1.0 if name == DRAINED else rng.uniform(0.4, 0.9)
        host = lab.host(name)
        used = [0, 0]  # VCPU, MEMORY_MB
        for n in range(20):
            if max(used[0] / host["vcpus"], used[1] / host["memory_mb"]) >= share:
                break
            flavor = rng.choice(list(FLAVORS))
            server = lab.boot(f"{name}-{n}", flavor, availability_zone=f"nova:{name}")
            if server["status"] == "ERROR":  # no room left for that flavor there
                lab.compute.delete(f"/servers/{server['id']}")
                continue
            used = [u + f for u, f in zip(used, FLAVORS[flavor], strict=True)]
    if rng.random() < 0.5:
        other = rng.choice(names[1:])
        lab.compute.put(f"/os-services/{lab.service(other)['id']}", {"status": "disabled"})


def books(lab: InProcessLab) -> dict[str, Any]:
    """Everything a what-if must leave as it is: every provider's amounts,
    generation and traits, every consumer's allocations, the compute services."""
    providers = lab.placement.get("/resource_providers")["resource_providers"]
    return {
        "amounts": lab.placement.amounts(),
        "providers": {
            p["uuid"]: (
                p["generation"],
                sorted(lab.placement.get(f"/resource_providers/{p['uuid']}/traits")["traits"]),
                lab.placement.provider_allocations(p["uuid"]),
            )
            for p in providers
        },
        "services": [(s["host"], s["status"]) for s in lab.service_list()],
        "sandboxes": lab.placement.get("/tally/v1/sandboxes")["sandboxes"],
    }


def predict(lab: InProcessLab) -> dict[str, Any]:
    """`tally drain cmp-1 --what-if -f json`, checked to write nothing."""
    before = books(lab)
    result = tally(lab, "drain", DRAINED, "--what-if", "-f", "json")
    predicted = json.loads(result.stdout)
    assert result.exit_code == (0 if predicted["drained"] else 1), result.output
    assert books(lab) == before  # the what-if wrote nothing, and left no sandbox
    return predicted


def room_after(lab: InProcessLab, predicted: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Host -> class -> what the prediction leaves free on each usable host (its
    rows for the hosts it changes, the live amounts for the others)."""
    amounts = lab.placement.amounts()
    rows = {(r["uuid"], r["resource_class"]): r for r in predicted["providers"]}
    found = {}
    for service in lab.service_list():
        host = service["host"]
        if host == DRAINED or service["status"] != "enabled" or service["state"] != "up":
            continue
        rp = lab.host(host)["provider_uuid"]
        found[host] = {}
        for rc, now in amounts[rp].items():
            after = rows.get((rp, rc)) or {
                "used_after": now["used"],
                "capacity_after": now["capacity"],
            }
            found[host][rc] = after["capacity_after"] - after["used_after"]
    return found


def make_room(lab: InProcessLab, predicted: dict[str, Any], rng: random.Random) -> None:
    """What an operator does with each server the prediction says would fail:
    delete it (it can go), or free room for it on the host the prediction leaves
    the most free memory on, deleting servers there until it fits after the drain."""
    room = room_after(lab, predicted)
    for move in predicted["moves"]:
        if move["outcome"] != "fails":
            continue
        if rng.random() < 0.5:
            lab.compute.delete(f"/servers/{move['server']}")
            continue
        wanted = {rc: n for held in lab.held(move["server"]).values() for rc, n in held.items()}
        host = max(room, key=lambda h: (room[h].get("MEMORY_MB", 0), h))
        free = room[host]
        on_it = lab.compute.get("/servers/detail", {"all_tenants": 1, "host": host})["servers"]
        for victim in on_it:
            if all(free.get(rc, 0) >= n for rc, n in wanted.items()):
                break
            for held in lab.held(victim["id"]).values():
                for rc, n in held.items():
                    free[rc] = free.get(rc, 0) + n
            lab.compute.delete(f"/servers/{victim['id']}")
        assert all(free.get(rc, 0) >= n for rc, n in wanted.items()), (host, wanted)
        for rc, n in wanted.items():
            free[rc] -= n  # this room is the failing server's now


@pytest.mark.parametrize("seed", SEEDS)
def test_the_prediction_is_what_the_real_drain_does(lab, seed):
    lab.service_list = lambda: lab.compute.get("/os-services")["services"]
    layout(lab, seed)
    rng = random.Random(seed)
    predicted = predict(lab)
    outcomes = {m["outcome"] for m in predicted["moves"]}
    assert outcomes == {"moves", "fails"}, (seed, predicted)  # both phases, each seed
    for _ in range(MAX_ROUNDS):
        failing = {m["server"]: m["reason"] for m in predicted["moves"] if m["outcome"] == "fails"}
        if not failing:
            break
        # the real drain refuses, naming the same servers for the same reason: nothing written
        before = books(lab)
        # (--timeout 0: were it to start migrations, not to wait for the lab's stopped clock)
        refused = tally(lab, "drain", DRAINED, "--apply", "--timeout", "0", "-f", "json")
        assert refused.exit_code == 1, refused.output
        report = json.loads(refused.stdout)
        assert not report["applied"] and not report["feasible"]
        assert books(lab) == before and lab.migrations() == []
        blocked = {m["server"]: m["error"] for m in report["moves"] if m["status"] == "blocked"}
        assert blocked.keys() == failing.keys(), seed
        for server, error in blocked.items():
            assert error.startswith(NO_ROOM) and failing[server].startswith(error), seed
        targets = {m["server"]: m["target"] for m in report["moves"]}
        assert targets == {m["server"]: m["to"] for m in predicted["moves"]}, seed
        # the operator makes room as the prediction suggests, and asks again
        make_room(lab, predicted, rng)
        predicted = predict(lab)
    else:
        pytest.fail(f"seed {seed}: still not drained after {MAX_ROUNDS} rounds of making room")
    assert predicted["drained"] and predicted["left"] == {}
    moves = {m["server"]: m for m in predicted["moves"]}

    dry = tally(lab, "drain", DRAINED, "-f", "json")  # the plan holds now: a dry run, 5
    assert dry.exit_code == 5, dry.output
    assert {m["server"]: m["target"] for m in json.loads(dry.stdout)["moves"]} == {
        s: m["to"] for s, m in moves.items()
    }
    before = lab.placement.amounts()
    real = doctor.drain(lab.placement, lab.compute, DRAINED, apply=True, wait=lab.step)
    assert {m.server for m in real.moves} == moves.keys()
    for move in real.moves:
        assert move.status == "completed", (seed, move)
        assert lab.server_doc(move.server)["OS-EXT-SRV-ATTR:host"] == moves[move.server]["to"]
    assert real.drained and real.left == predicted["left"]
    # every host's usage after: the prediction's rows where it changes one, as before elsewhere
    rows = {(r["uuid"], r["resource_class"]): r for r in predicted["providers"]}
    assert {r["provider"] for r in rows.values()} >= {DRAINED} | {m["to"] for m in moves.values()}
    for rp, classes in lab.placement.amounts().items():
        for rc, now in classes.items():
            was = before[rp][rc]
            row = rows.get((rp, rc)) or {
                "used_after": was["used"],
                "capacity_after": was["capacity"],
            }
            assert (row["used_after"], row["capacity_after"]) == (now["used"], now["capacity"])
            assert row.get("fits", True) and now["used"] <= now["capacity"]


def test_the_table_says_where_each_would_go_and_the_last_line_that_nothing_was_written(cloud):
    web = cloud.boot("web", availability_zone="nova:cmp-1")
    table = tally(cloud, "drain", "cmp-1", "--what-if")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[-2:] == [
        "would drain cmp-1",
        "dry run: would move 1 server off cmp-1 (tally drain cmp-1 --apply); nothing was written",
    ]
    (row,) = [line for line in lines if web["id"] in line]
    assert "| moves" in row and "| cmp-2" in row  # the most free memory, then by name
    assert cloud.service("cmp-1")["status"] == "enabled"
    assert tally(cloud, "drain", "cmp-1", "--what-if", "--apply").exit_code == 127
    missing = tally(cloud, "drain", "cmp-9", "--what-if")  # bad input, as without --what-if
    assert missing.exit_code == 127 and "no compute host cmp-9" in missing.stderr
    assert cloud.placement.get("/tally/v1/sandboxes")["sandboxes"] == []
