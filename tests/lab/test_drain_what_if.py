"""`tally drain HOST --what-if` predicts the real drain (issue 41): on seeded lab
layouts with some hosts nearly full (so some moves fail), the prediction is made,
nothing is written by it, then the host is drained for real through the compute API
and every server's outcome is compared: which move and to which host, which fail and
why, what stays on the host, and every host's usage after (each within capacity).

    cmp-1 (drained)  servers of 1 to 8 VCPU, nearly full
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


def failed_because(lab: InProcessLab, server: str) -> str:
    """What the compute API says of the server's last live migration's failed event."""
    listed = lab.compute.get(f"/servers/{server}/os-instance-actions")["instanceActions"]
    last = next(a for a in listed if a["action"] == "live-migration")
    found = lab.compute.get(f"/servers/{server}/os-instance-actions/{last['request_id']}")
    (event,) = [e for e in found["instanceAction"]["events"] if e["result"] == "Error"]
    return event["details"]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_prediction_is_what_the_real_drain_does(lab, seed):
    lab.service_list = lambda: lab.compute.get("/os-services")["services"]
    layout(lab, seed)
    before = books(lab)
    result = tally(lab, "drain", DRAINED, "--what-if", "-f", "json")
    predicted = json.loads(result.stdout)
    assert result.exit_code == (0 if predicted["drained"] else 1), result.output
    assert books(lab) == before  # the what-if wrote nothing, and left no sandbox
    moves = {m["server"]: m for m in predicted["moves"]}
    outcomes = {m["outcome"] for m in moves.values()}
    assert outcomes == {"moves", "fails"}, (seed, predicted)

    real = doctor.drain(lab.placement, lab.compute, DRAINED, apply=True, wait=lab.step)
    assert {m.server for m in real.moves} == moves.keys()
    for move in real.moves:
        guess = moves[move.server]
        if move.status == "completed":
            assert guess["outcome"] == "moves", (seed, guess)
            assert lab.server_doc(move.server)["OS-EXT-SRV-ATTR:host"] == guess["to"]
        else:
            assert (move.status, guess["outcome"]) == ("error", "fails"), (seed, guess)
            assert guess["reason"].startswith("No valid host was found")
            assert failed_because(lab, move.server).startswith("No valid host was found")
    assert real.left == predicted["left"]
    assert real.drained == predicted["drained"]
    amounts = lab.placement.amounts()
    rows = predicted["providers"]
    assert {r["provider"] for r in rows} >= {DRAINED} | {m["to"] for m in moves.values()} - {None}
    for row in rows:
        if row["resource_class"]:
            now = amounts[row["uuid"]][row["resource_class"]]
            assert (row["used_after"], row["capacity_after"]) == (now["used"], now["capacity"])
            assert row["fits"] and now["used"] <= now["capacity"]


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
    missing = tally(cloud, "drain", "cmp-9", "--what-if")
    assert missing.exit_code == 1 and "no nova-compute service on host cmp-9" in missing.stderr
    assert cloud.placement.get("/tally/v1/sandboxes")["sandboxes"] == []
