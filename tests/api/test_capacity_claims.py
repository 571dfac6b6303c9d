"""`tally capacity` against the brute force: on a dozen seeded random worlds, for a
dozen shapes, the count it prints (in total and per host) equals the number of
instances a client places by claiming the first allocation candidate until none is
left, on a copy of the world (SQLite's backup API; each shape's claims are deleted
again before the next shape, and the copy ends with the template's usages).

A world, built through the API:

    host-0 .. host-k   VCPU, MEMORY_MB (random totals, reserved, allocation
                       ratios, MEMORY_MB step size), often DISK_GB (random
                       step size, min_unit, max_unit); HW_CPU_X86_AVX2 and
                       CUSTOM_SLOW on some; some in aggregate AGG
    tree-j             MEMORY_MB (sometimes DISK_GB), in AGG or not
      tree-j-numa0     VCPU (sometimes MEMORY_MB too)
      tree-j-numa1     VCPU, sometimes HW_CPU_X86_AVX2
    shared             DISK_GB, MISC_SHARES_VIA_AGGREGATE, in AGG (most worlds)
    + a few consumers already holding part of it
"""

from __future__ import annotations

import json
import random
import sqlite3
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.main import cli
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.db.engine import make_engine
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database

AGG = "a66a66a6-0000-4000-8000-00000000a66a"
SHARES = "MISC_SHARES_VIA_AGGREGATE"
# (resources, --required, --member-of)
SHAPES = (
    ("VCPU=3", (), ()),
    ("VCPU=2,MEMORY_MB=1024", (), ()),
    ("VCPU=4,MEMORY_MB=4096", (), ()),
    ("MEMORY_MB=3072", (), ()),
    ("DISK_GB=20", (), ()),
    ("VCPU=1,DISK_GB=20", (), ()),
    ("VCPU=2,MEMORY_MB=2048,DISK_GB=10", (), ()),
    ("VCPU=2", ("HW_CPU_X86_AVX2",), ()),
    ("VCPU=2,MEMORY_MB=512", (), (AGG,)),
    ("VCPU=2,MEMORY_MB=1024", ("!CUSTOM_SLOW",), ()),
    ("DISK_GB=15", (), ()),
    ("VCPU=3,MEMORY_MB=3000,DISK_GB=25", (), ()),
)


class World:
    """A Tally app over one SQLite file, and a Placement client to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.engine = make_engine(f"sqlite:///{path}")
        self.client = PlacementClient(
            "http://tally",
            version="1.39",
            transport=httpx.WSGITransport(app=create_app(Settings.of(), self.engine)),
        )

    def close(self) -> None:
        self.client.close()
        self.engine.dispose()

    def copy(self, path: Path) -> World:
        source, target = sqlite3.connect(self.path), sqlite3.connect(path)
        with target:
            source.backup(target)
        source.close()
        target.close()
        return World(path)

    # ------------------------------------------------------------ building

    def provider(self, name: str, parent: str | None = None, **inventory: dict) -> str:
        body = {"name": name, "uuid": str(uuidlib.uuid4()), "parent_provider_uuid": parent}
        self.client.post("/resource_providers", body)
        self.put(body["uuid"], "inventories", {"inventories": inventory})
        return body["uuid"]

    def put(self, rp: str, what: str, body: dict) -> None:
        generation = self.client.provider(rp)["generation"]
        self.client.put(
            f"/resource_providers/{rp}/{what}", {**body, "resource_provider_generation": generation}
        )

    def claim(self, allocations: dict[str, dict[str, int]]) -> str:
        consumer = str(uuidlib.uuid4())
        self.client.put(
            f"/allocations/{consumer}",
            {
                "allocations": {rp: {"resources": r} for rp, r in allocations.items()},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        )
        return consumer


def inventory(total: int, **fields: object) -> dict:
    return {"total": total, "reserved": 0, "allocation_ratio": 1.0, **fields}


def build(world: World, rng: random.Random) -> dict[str, dict]:
    """A random world; provider uuid -> its inventories."""
    made: dict[str, dict] = {}
    world.client.put("/traits/CUSTOM_SLOW")
    shared_in_agg = rng.random() < 0.85

    def add(name: str, parent: str | None = None, traits=(), aggs=(), **inv: dict) -> str:
        rp = world.provider(name, parent, **inv)
        made[rp] = inv
        if traits:
            world.put(rp, "traits", {"traits": list(traits)})
        if aggs:
            world.put(rp, "aggregates", {"aggregates": list(aggs)})
        return rp

    for i in range(rng.randint(2, 4)):
        inv = {
            "VCPU": inventory(
                rng.randint(2, 5),
                reserved=rng.choice([0, 0, 1]),
                allocation_ratio=rng.choice([1.0, 1.5, 2.0]),
            ),
            "MEMORY_MB": inventory(
                rng.choice([4096, 6144, 8192]),
                reserved=rng.choice([0, 512]),
                allocation_ratio=rng.choice([1.0, 1.5]),
                step_size=rng.choice([1, 256]),
            ),
        }
        if rng.random() < 0.6:
            total = rng.choice([40, 60, 100])
            inv["DISK_GB"] = inventory(
                total,
                step_size=rng.choice([1, 5, 10]),
                min_unit=rng.choice([1, 5]),
                max_unit=rng.choice([total, 30]),
            )
        traits = rng.sample(["HW_CPU_X86_AVX2", "CUSTOM_SLOW"], rng.randint(0, 2))
        aggs = [AGG] if rng.random() < 0.7 else []
        add(f"host-{i}", traits=traits, aggs=aggs, **inv)
    for j in range(rng.randint(1, 2)):
        root_inv = {"MEMORY_MB": inventory(rng.choice([4096, 8192]))}
        if rng.random() < 0.4:
            root_inv["DISK_GB"] = inventory(50)
        root = add(f"tree-{j}", aggs=[AGG] if rng.random() < 0.5 else [], **root_inv)
        numa0 = {"VCPU": inventory(rng.randint(2, 4))}
        if rng.random() < 0.5:
            numa0["MEMORY_MB"] = inventory(4096, reserved=rng.choice([0, 1024]))
        add(f"tree-{j}-numa0", root, **numa0)
        avx = ["HW_CPU_X86_AVX2"] if rng.random() < 0.5 else []
        add(f"tree-{j}-numa1", root, traits=avx, VCPU=inventory(rng.randint(2, 4)))
    if rng.random() < 0.95:
        disk = inventory(rng.choice([40, 60, 100]), step_size=rng.choice([1, 5]))
        add("shared", traits=[SHARES], aggs=[AGG] if shared_in_agg else [], DISK_GB=disk)
    for _ in range(rng.randint(3, 8)):  # consumers already there (refusals are fine)
        rp = rng.choice(list(made))
        rc = rng.choice(list(made[rp]))
        record = made[rp][rc]
        step = record.get("step_size", 1)
        amount = step * rng.randint(1, max(1, record["total"] // (3 * step)))
        try:
            world.claim({rp: {rc: amount}})
        except PlacementError:
            pass
    return made


def query(resources: str, required: tuple, member_of: tuple) -> dict:
    return {
        "resources": resources.replace("=", ":"),
        "required": list(required),
        "member_of": list(member_of),
    }


def brute_force(world: World, params: dict, host_of: dict[str, str]) -> dict[str, int]:
    """Claim the first candidate until there is none: instances per host. The
    claims are deleted again after, so the next shape starts from the same world."""
    placed: dict[str, int] = {}
    consumers = []
    while found := world.client.get("/allocation_candidates", params)["allocation_requests"]:
        first = {rp: a["resources"] for rp, a in found[0]["allocations"].items()}
        consumers.append(world.claim(first))
        host = next((host_of[rp] for rp in first if rp in host_of), next(iter(first)))
        placed[host] = placed.get(host, 0) + 1
    for consumer in consumers:
        world.client.delete(f"/allocations/{consumer}")
    return placed


def run_capacity(world: World, resources: str, required: tuple, member_of: tuple):
    args = ["capacity", "--resource", resources, "-f", "json"]
    args += [f"--required={t}" for t in required] + [f"--member-of={a}" for a in member_of]
    result = CliRunner().invoke(cli, args, obj=Context.for_client(world.client))
    assert result.exit_code in (0, 1), result.output
    return result


def usages(world: World, providers) -> dict[str, dict[str, int]]:
    return {rp: world.client.usages(rp) for rp in providers}


@pytest.fixture
def worlds() -> Iterator[list[World]]:
    made: list[World] = []
    yield made
    for world in made:
        world.close()


@pytest.mark.parametrize("seed", range(12))
def test_capacity_equals_claiming_until_refused(seed: int, tmp_path: Path, worlds) -> None:
    template = World(tmp_path / "world.sqlite")
    worlds.append(template)
    prepare_database(template.engine)
    made = build(template, random.Random(seed))
    roots = {rp: template.client.provider(rp)["root_provider_uuid"] for rp in made}
    listed = template.client.get("/resource_providers", {"required": SHARES})
    sharing = {p["uuid"] for p in listed["resource_providers"]}
    host_of = {rp: root for rp, root in roots.items() if rp not in sharing}
    copy = template.copy(tmp_path / "claims.sqlite")
    worlds.append(copy)
    for resources, required, member_of in SHAPES:
        result = run_capacity(template, resources, required, member_of)
        rows = json.loads(result.stdout)
        counted = {row["uuid"]: row["fits"] for row in rows if row["fits"]}
        total = sum(counted.values())
        assert result.exit_code == (0 if total else 1)
        assert result.stderr.startswith(f"{total} more of {resources} fit")
        assert all(row["limiting"] for row in rows)

        claimed = brute_force(copy, query(resources, required, member_of), host_of)
        assert counted == claimed, (seed, resources, required, member_of)
    assert usages(copy, made) == usages(template, made)  # each shape started from the world


AGG2 = "b66b66b6-0000-4000-8000-00000000b66b"


@pytest.fixture
def small(tmp_path: Path, worlds) -> World:
    """host-a (VCPU 4; AGG), host-b (VCPU 2; AGG, AGG2), host-c (VCPU 2),
    shared (DISK_GB 30, sharing; AGG)."""
    world = World(tmp_path / "small.sqlite")
    worlds.append(world)
    prepare_database(world.engine)
    for name, vcpus, aggs in (("host-a", 4, [AGG]), ("host-b", 2, [AGG, AGG2]), ("host-c", 2, [])):
        rp = world.provider(name, VCPU={"total": vcpus})
        if aggs:
            world.put(rp, "aggregates", {"aggregates": aggs})
    shared = world.provider("shared", DISK_GB={"total": 30})
    world.put(shared, "traits", {"traits": [SHARES]})
    world.put(shared, "aggregates", {"aggregates": [AGG]})
    return world


def invoke(world: World, *args: str) -> Result:
    return CliRunner().invoke(cli, ["capacity", *args], obj=Context.for_client(world.client))


def test_by_aggregate_sums_the_hosts_of_each(small: World) -> None:
    result = invoke(small, "--resource", "VCPU=1", "--by", "aggregate", "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"aggregate": AGG, "providers": 2, "fits": 6},
        {"aggregate": AGG2, "providers": 1, "fits": 2},
        {"aggregate": None, "providers": 1, "fits": 2},
    ]
    assert result.stderr == "8 more of VCPU=1 fit, on 3 providers\n"


def test_a_sharing_provider_that_runs_out_is_named(small: World) -> None:
    result = invoke(small, "--resource", "VCPU=1,DISK_GB=10")
    assert result.exit_code == 0, result.output
    lines = [line.split("|")[1:-1] for line in result.stdout.splitlines() if "host-" in line]
    assert [[cell.strip() for cell in line[:1] + line[2:]] for line in lines] == [
        ["host-a", "3", "DISK_GB on shared"],
        ["host-b", "0", "DISK_GB on shared"],
    ]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ((), "give either --flavor NAME or --resource CLASS=N,..."),
        (("--resource", "VCPU"), "Invalid value for --resource: 'VCPU' is not CLASS=N or CLASS:N"),
        (("--resource", "VCPU=0"), "'VCPU=0': the amount must be at least 1"),
        (("--flavor", "x", "--resource", "VCPU=1"), "give either --flavor NAME or --resource"),
    ],
)
def test_bad_input_exits_127(small: World, args: tuple[str, ...], why: str) -> None:
    result = invoke(small, *args)
    assert result.exit_code == 127
    assert why in result.stderr.splitlines()[-1]


def test_nothing_fits_exits_1(small: World) -> None:
    result = invoke(small, "--resource", "VCPU=5", "-f", "json")
    assert (result.exit_code, json.loads(result.stdout)) == (1, [])
    assert result.stderr.startswith("0 more of VCPU=5 fit")
