"""What if, measured (issue 41): seeded random plans (moves, boots, resizes,
inventory changes, removals, disabled and drained hosts, providers added, copies of
a host tree) on small clouds of hosts with NUMA nodes and devices as child
providers, some in an aggregate. Each plan is tried in a sandbox on one database
and executed for real, step by step through the Placement API, on a copy of it;
every step's verdict (applied, or the status and code refused with, and the detail
wherever the real API answered the refusal) and the final amounts (every
provider's inventories and usage), and searches asked after (inside: from the
sandbox's answers made from the live index's kept ones, and kept again), are equal.

The real executor below is written from the API alone (the sandbox's own code is
never called on that side): what a change means is spelled in
`tally.placement.ledger.sandbox.changes`'s docstring. The one thing it takes from
the sandbox is the uuids of the copies of a template (made up there: uuid4).

SANDBOX_CLOUDS x SANDBOX_PLANS plans on SQLite (default 10 x 30 = 300, about 30 s);
on PostgreSQL and MySQL (when bin/test starts them) SANDBOX_SERVER_CLOUDS x
SANDBOX_SERVER_PLANS (default 2 x 10). Raise them to run more (the issue's measure,
1,000 and more, is run that way).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import tempfile
import urllib.parse
import uuid as uuidlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tally.config import Settings
from tally.db import journal
from tally.db import schema as t
from tally.db.engine import make_engine
from tally.db.schema import metadata
from tally.db.transaction import transaction
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database
from tally.placement.ledger.candidates import Index
from tests.conftest import PlacementClient, server_database_url

CLOUDS = int(os.environ.get("SANDBOX_CLOUDS", "10"))
PLANS = int(os.environ.get("SANDBOX_PLANS", "30"))
SERVER_CLOUDS = int(os.environ.get("SANDBOX_SERVER_CLOUDS", "2"))
SERVER_PLANS = int(os.environ.get("SANDBOX_SERVER_PLANS", "10"))
DISABLED = "COMPUTE_STATUS_DISABLED"
SHAPES = (
    "resources=VCPU:1,MEMORY_MB:512",
    "resources=VCPU:2,MEMORY_MB:1024",
    "resources=VCPU:1,MEMORY_MB:256,SRIOV_NET_VF:1",
    "resources=VCPU:4,MEMORY_MB:2048&root_required=!COMPUTE_STATUS_DISABLED",
    "resources1=VCPU:1&resources2=SRIOV_NET_VF:2&group_policy=none",
)


def _uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def _ok(result: Any) -> Any:
    assert result.status_code < 300, result.text
    return result.json if result.text else None


class Cloud:
    """Hosts (some with two NUMA children and a device under one, some in an
    aggregate) and consumers."""

    def __init__(self, client: PlacementClient, rng: random.Random) -> None:
        self.client, self.rng = client, rng
        self.hosts: list[str] = []
        self.providers: list[str] = []
        self.consumers: list[str] = []
        self.aggregate = _uuid(rng)
        self.shapes = (*SHAPES, f"resources=VCPU:1&member_of={self.aggregate}")
        for _ in range(rng.randint(3, 5)):
            host = self._provider(None, {"VCPU": rng.choice([4, 8]), "MEMORY_MB": 4096})
            self.hosts.append(host)
            if rng.random() < 0.5:
                body = {"aggregates": [self.aggregate], "resource_provider_generation": 1}
                _ok(client.simulate_put(f"/resource_providers/{host}/aggregates", json=body))
            if rng.random() < 0.6:
                numa = [self._provider(host, {"VCPU": 4, "MEMORY_MB": 2048}) for _ in range(2)]
                self._provider(numa[0], {"SRIOV_NET_VF": rng.choice([2, 4])})
            for _ in range(rng.randint(0, 3)):
                self._consumer(rng)

    def _provider(self, parent: str | None, inventory: dict[str, int]) -> str:
        uuid = _uuid(self.rng)
        body: dict[str, Any] = {"name": uuid, "uuid": uuid}
        if parent:
            body["parent_provider_uuid"] = parent
        _ok(self.client.simulate_post("/resource_providers", json=body))
        inventories = {rc: {"total": n} for rc, n in inventory.items()}
        _ok(
            self.client.simulate_put(
                f"/resource_providers/{uuid}/inventories",
                json={"resource_provider_generation": 0, "inventories": inventories},
            )
        )
        self.providers.append(uuid)
        return uuid

    def _consumer(self, rng: random.Random) -> None:
        query = rng.choice(SHAPES[:3]) + "&limit=1"
        found = self.client.simulate_get(f"/allocation_candidates?{query}").json
        if not found["allocation_requests"]:
            return
        uuid = _uuid(rng)
        self.consumers.append(uuid)
        _put(self.client, uuid, found["allocation_requests"][0]["allocations"], None, "INSTANCE")


def _put(client: PlacementClient, consumer: str, allocations: dict, generation, kind) -> Any:  # noqa: ANN001
    body = {
        "allocations": {u: {"resources": a["resources"]} for u, a in allocations.items()},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": generation,
        "consumer_type": kind,
    }
    return client.simulate_put(f"/allocations/{consumer}", json=body)


def _add(rng: random.Random, cloud: Cloud, providers: list[str]) -> dict[str, Any]:
    """A provider to add: mostly sound, sometimes refused (a parent gone, a uuid or
    name taken, a trait or an inventory the API refuses)."""
    change: dict[str, Any] = {"kind": "add", "provider": _uuid(rng)}
    if rng.random() < 0.05:
        change["provider"] = rng.choice(providers)
    if rng.random() < 0.5:
        change["parent"] = rng.choice(providers)
    if rng.random() < 0.3:
        change["name"] = rng.choice(providers) if rng.random() < 0.3 else f"new-{rng.random()}"
    inventories = {}
    for rc, total in (("VCPU", 4), ("MEMORY_MB", 2048), ("SRIOV_NET_VF", 2)):
        if rng.random() < 0.6:
            inventories[rc] = {"total": total}
            if rng.random() < 0.1:
                inventories[rc]["reserved"] = total + 1
    if inventories:
        change["inventories"] = inventories
    traits = rng.sample(["HW_CPU_X86_AVX2", "HW_NIC_SRIOV", "CUSTOM_NOPE"], rng.randint(0, 2))
    if traits and (rng.random() < 0.1 or "CUSTOM_NOPE" not in traits):
        change["traits"] = traits
    return change


def random_plan(rng: random.Random, cloud: Cloud) -> list[dict[str, Any]]:
    consumers = list(cloud.consumers)
    providers = list(cloud.providers)
    plan: list[dict[str, Any]] = []
    for _ in range(rng.randint(2, 7)):
        kind = rng.choices(
            ["move", "resize", "boot", "inventory", "remove", "disable", "drain", "add", "copy"],
            [4, 2, 3, 3, 1, 1, 1, 2, 1],
        )[0]
        if kind in ("move", "resize") and not consumers:
            kind = "boot"
        if kind == "move":
            to = "anywhere" if rng.random() < 0.5 else rng.choice(cloud.hosts)
            plan.append({"kind": "move", "consumer": rng.choice(consumers), "to": to})
        elif kind == "resize":
            resources = {"VCPU": rng.choice([0, 1, 2, 4, 8, 16])}
            if rng.random() < 0.5:
                resources["MEMORY_MB"] = rng.choice([256, 1024, 4096])
            plan.append(
                {"kind": "resize", "consumer": rng.choice(consumers), "resources": resources}
            )
        elif kind == "boot":
            made = [_uuid(rng) for _ in range(rng.randint(1, 3))]
            consumers += made
            boot = {"kind": "boot", "query": rng.choice(cloud.shapes), "consumers": made}
            plan.append({**boot, "project_id": "p", "user_id": "u"})
        elif kind == "inventory":
            change: dict[str, Any] = {"kind": "inventory", "provider": rng.choice(providers)}
            change["resource_class"] = rng.choice(["VCPU", "MEMORY_MB", "SRIOV_NET_VF"])
            change["total"] = rng.choice([1, 2, 4, 8, 16])
            if change["resource_class"] == "MEMORY_MB":
                change["total"] *= 512
            if rng.random() < 0.3:
                change["reserved"] = rng.choice([0, 1])
            if rng.random() < 0.3:
                change["allocation_ratio"] = rng.choice([0.5, 1.0, 2.0])
            if rng.random() < 0.1:
                change["max_unit"] = 2
            plan.append(change)
        elif kind == "remove":
            tree = rng.random() < 0.6
            pool = cloud.hosts if tree else providers
            plan.append({"kind": "remove", "provider": rng.choice(pool), "tree": tree})
        elif kind == "add":
            plan.append(_add(rng, cloud, providers))
            providers.append(plan[-1]["provider"])
        elif kind == "copy":
            template = rng.choice(cloud.hosts if rng.random() < 0.8 else cloud.providers)
            plan.append({"kind": "add", "template": template, "count": rng.randint(1, 3)})
        else:
            plan.append({"kind": kind, "provider": rng.choice(cloud.hosts)})
    return plan


class Real:
    """The plan executed for real through the API, step by step. `copies`: per
    change (numbered from 1), the uuids the sandbox gave the copies of a template."""

    def __init__(self, client: PlacementClient, copies: dict[int, list[str]]) -> None:
        self.client, self.copies = client, copies
        self.steps: list[tuple] = []

    def run(self, plan: list[dict[str, Any]]) -> list[tuple]:
        for n, change in enumerate(plan, 1):
            if change["kind"] == "add" and "template" in change:
                self._copy(change, iter(self.copies.get(n, ())))
            else:
                getattr(self, "_" + change["kind"])(change)
        return self.steps

    def _note(self, kind: str, subject: str, result: Any) -> None:
        """A step's verdict from the API's answer."""
        if result.status_code < 300:
            self.steps.append((kind, subject, True, None, None, None))
        else:
            error = result.json["errors"][0]
            detail = error["detail"]
            self.steps.append((kind, subject, False, result.status_code, error["code"], detail))

    def _refused(self, kind: str, subject: str, status: int, code: str) -> None:
        """A step refused before any write (no API error to show: no detail)."""
        self.steps.append((kind, subject, False, status, code, "-"))

    def _held(self, consumer: str) -> dict[str, Any] | None:
        found = self.client.simulate_get(f"/allocations/{consumer}").json
        return found if found["allocations"] else None

    def _move(self, change: dict[str, Any], kind: str = "move") -> None:
        consumer, to = change["consumer"], change["to"]
        held = self._held(consumer)
        if held is None:
            return self._refused(kind, consumer, 404, "placement.undefined_code")
        shape: Counter = Counter()
        for a in held["allocations"].values():
            shape.update(a["resources"])
        query = {"resources": ",".join(f"{rc}:{n}" for rc, n in sorted(shape.items()))}
        if to == "anywhere":
            query["root_required"] = f"!{DISABLED}"
        else:
            query["in_tree"] = to
        query["limit"] = "16"
        found = self.client.simulate_get(
            "/allocation_candidates", query_string=urllib.parse.urlencode(query, safe=":,!")
        ).json
        summaries = found["provider_summaries"]
        roots = {summaries_root(self.client, u) for u in held["allocations"]}
        for candidate in found["allocation_requests"]:
            chosen = candidate["allocations"]
            if to != "anywhere" or not {summaries[u]["root_provider_uuid"] for u in chosen} & roots:
                break
        else:
            return self._refused(kind, consumer, 409, "tally.sandbox.no_host")
        kept = held["consumer_type"]
        self._note(
            kind, consumer, _put(self.client, consumer, chosen, held["consumer_generation"], kept)
        )

    def _resize(self, change: dict[str, Any]) -> None:
        consumer = change["consumer"]
        held = self._held(consumer)
        if held is None:
            return self._refused("resize", consumer, 404, "placement.undefined_code")
        new = {u: dict(a["resources"]) for u, a in held["allocations"].items()}
        for rc, amount in change["resources"].items():
            holders = [u for u, res in new.items() if rc in held["allocations"][u]["resources"]]
            if len(holders) != 1:
                return self._refused("resize", consumer, 400, "placement.undefined_code")
            if amount:
                new[holders[0]][rc] = amount
            else:
                del new[holders[0]][rc]
        allocations = {u: {"resources": res} for u, res in new.items() if res}
        generation, kept = held["consumer_generation"], held["consumer_type"]
        self._note("resize", consumer, _put(self.client, consumer, allocations, generation, kept))

    def _boot(self, change: dict[str, Any]) -> None:
        for consumer in change["consumers"]:
            found = self.client.simulate_get(
                "/allocation_candidates", query_string=change["query"] + "&limit=1"
            ).json
            if not found["allocation_requests"]:
                self._refused("boot", consumer, 409, "tally.sandbox.no_host")
                continue
            chosen = found["allocation_requests"][0]["allocations"]
            self._note("boot", consumer, _put(self.client, consumer, chosen, None, "INSTANCE"))

    def _inventory(self, change: dict[str, Any]) -> None:
        uuid, rc = change["provider"], change["resource_class"]
        got = self.client.simulate_get(f"/resource_providers/{uuid}/inventories")
        if got.status_code == 404:
            return self._note("inventory", uuid, got)
        inventories = got.json["inventories"]
        fields = {
            k: v for k, v in change.items() if k not in ("kind", "provider", "resource_class")
        }
        inventories[rc] = {**inventories.get(rc, {}), **fields}
        body = {
            "resource_provider_generation": got.json["resource_provider_generation"],
            "inventories": inventories,
        }
        result = self.client.simulate_put(f"/resource_providers/{uuid}/inventories", json=body)
        self._note("inventory", uuid, result)

    def _under(self, uuid: str) -> list[tuple[int, str, str | None]]:
        """(depth under `uuid`, uuid, parent) of `uuid` and every provider below it."""
        listed = self.client.simulate_get("/resource_providers", params={"in_tree": uuid}).json[
            "resource_providers"
        ]
        parent = {p["uuid"]: p["parent_provider_uuid"] for p in listed}

        def depth(u: str) -> int | None:
            if u == uuid:
                return 0
            below = None if parent[u] is None else depth(parent[u])
            return None if below is None else below + 1

        return [(d, u, parent[u]) for u in parent if (d := depth(u)) is not None]

    def _remove(self, change: dict[str, Any]) -> None:
        uuid = change["provider"]
        order = [uuid]
        if change["tree"]:
            under = self._under(uuid)
            if under:
                order = [u for _, u, _ in sorted(under, key=lambda m: (-m[0], m[1]))]
        for member in order:
            self._note(
                "remove", member, self.client.simulate_delete(f"/resource_providers/{member}")
            )

    def _disable(self, change: dict[str, Any]) -> None:
        uuid = change["provider"]
        got = self.client.simulate_get(f"/resource_providers/{uuid}/traits")
        if got.status_code == 404:
            return self._note("disable", uuid, got)
        body = {
            "resource_provider_generation": got.json["resource_provider_generation"],
            "traits": sorted({*got.json["traits"], DISABLED}),
        }
        self._note(
            "disable",
            uuid,
            self.client.simulate_put(f"/resource_providers/{uuid}/traits", json=body),
        )

    def _add(
        self,
        change: dict[str, Any],
        aggregates: list[str] = (),
    ) -> None:
        """POST the provider, then PUT its inventories, traits and aggregates; one
        refused: the provider deleted again (a sandbox's add is all or none)."""
        uuid = change["provider"]
        body = {"name": change.get("name", uuid), "uuid": uuid}
        if change.get("parent"):
            body["parent_provider_uuid"] = change["parent"]
        made = self.client.simulate_post("/resource_providers", json=body)
        if made.status_code >= 300:
            return self._note("add", uuid, made)
        generation = 0
        for path, key, wanted in (
            ("inventories", "inventories", change.get("inventories")),
            ("traits", "traits", change.get("traits")),
            ("aggregates", "aggregates", list(aggregates)),
        ):
            if not wanted:
                continue
            body = {key: wanted, "resource_provider_generation": generation}
            result = self.client.simulate_put(f"/resource_providers/{uuid}/{path}", json=body)
            if result.status_code >= 300:
                _ok(self.client.simulate_delete(f"/resource_providers/{uuid}"))
                return self._note("add", uuid, result)
            generation = result.json["resource_provider_generation"]
        self._note("add", uuid, made)

    def _copy(self, change: dict[str, Any], uuids: Any) -> None:
        """`count` copies of the tree under `template`, parents first then by uuid,
        each provider as the template's is now."""
        template = change["template"]
        got = self.client.simulate_get(f"/resource_providers/{template}")
        if got.status_code == 404:
            return self._note("add", template, got)
        members = sorted(self._under(template))
        shown = {}
        for _, uuid, _ in members:
            shown[uuid] = {
                what: self.client.simulate_get(f"/resource_providers/{uuid}/{what}").json[what]
                for what in ("inventories", "traits", "aggregates")
            }
        for _ in range(change["count"]):
            made: dict[str, str] = {}
            for _, uuid, parent in members:
                made[uuid] = next(uuids)
                copy = {
                    "provider": made[uuid],
                    "inventories": shown[uuid]["inventories"],
                    "traits": shown[uuid]["traits"],
                }
                if uuid != template:
                    copy["parent"] = made[parent]
                self._add(copy, shown[uuid]["aggregates"])

    def _drain(self, change: dict[str, Any]) -> None:
        self._disable(change)
        listed = self.client.simulate_get(
            "/resource_providers", params={"in_tree": change["provider"]}
        ).json.get("resource_providers", [])
        consumers = set()
        for p in listed:
            held = self.client.simulate_get(f"/resource_providers/{p['uuid']}/allocations").json
            consumers |= held["allocations"].keys()
        for consumer in sorted(consumers):
            self._move({"consumer": consumer, "to": "anywhere"})


def summaries_root(client: PlacementClient, uuid: str) -> str:
    return client.simulate_get(f"/resource_providers/{uuid}").json["root_provider_uuid"]


def _verdicts(steps: list[dict[str, Any]]) -> list[tuple]:
    """The sandbox's steps as the real executor notes them (no detail where the real
    side had no API error to show)."""
    found = []
    for step in steps:
        error = step["error"]
        if error is None:
            found.append((step["kind"], step["subject"], True, None, None, None))
            continue
        shown = error["detail"]
        if error["code"] == "tally.sandbox.no_host" or error["detail"].startswith("Consumer "):
            shown = "-"
        found.append((step["kind"], step["subject"], False, error["status"], error["code"], shown))
    return found


def _differ(inside: dict, outside: dict) -> dict:
    """The providers whose amounts differ (for a failure's message)."""
    a, b = inside["providers"], outside["providers"]
    return {u: (a.get(u), b.get(u)) for u in a.keys() | b.keys() if a.get(u) != b.get(u)}


def _copy(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database (WAL included), written through
    SQLite into `target` (which an engine may have open)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


AFTER = "resources=VCPU:1,MEMORY_MB:512&root_required=!COMPUTE_STATUS_DISABLED"


def _afters(cloud: Cloud) -> list[str]:
    """The searches asked after a plan: a whole answer (the live index keeps it:
    inside, its copy with the trees the plan touched searched again), and one cut
    to a few candidates in the aggregate."""
    return [AFTER, f"resources=VCPU:1&member_of={cloud.aggregate}&limit=3"]


@pytest.fixture
def fast_dir(tmp_path: Path) -> Path:
    """A directory in memory when there is one (a plan makes dozens of commits)."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        return tmp_path
    made = Path(tempfile.mkdtemp(dir=shm, prefix="tally-sandbox-"))
    yield made
    shutil.rmtree(made, ignore_errors=True)


class Databases:
    """The database a plan is tried on, and the one it is executed on for real,
    made again as a copy of the first before each plan (`reset`)."""

    def __init__(self, backend: str, fast_dir: Path) -> None:
        self.backend, self.drops = backend, []
        if backend == "sqlite":
            self.paths = [fast_dir / f"{n}.sqlite" for n in ("tried", "pristine", "real")]
            urls = [f"sqlite:///{self.paths[0]}", f"sqlite:///{self.paths[2]}"]
        else:
            urls = []
            for _ in range(2):
                url, drop = server_database_url(backend)
                urls.append(url)
                self.drops.append(drop)
        self.tried, self.real = (make_engine(url) for url in urls)
        prepare_database(self.tried)
        prepare_database(self.real)

    def keep_pristine(self) -> None:
        """The tried database as the cloud was made (sandboxes never change it)."""
        if self.backend == "sqlite":
            _copy(self.paths[0], self.paths[1])

    def reset(self, index: Index) -> None:
        """The real database made a copy of the pristine one again."""
        if self.backend == "sqlite":
            _copy(self.paths[1], self.paths[2])
        else:
            _copy_rows(self.tried, self.real)
        index.version = None  # (it loads whole when next asked)

    def close(self) -> None:
        self.real.dispose()
        self.tried.dispose()
        for drop in self.drops:
            drop()


_NOT_COPIED = {t.ledger_writers.name, t.ledger_changes.name, t.sandboxes.name}


def _copy_rows(source: sa.Engine, target: sa.Engine) -> None:
    """Every row of Tally's tables (the journal and sandboxes aside) from `source`
    into `target`, ids kept (PostgreSQL's sequences moved past them); every index
    of `target` told to load whole."""
    tables = [table for table in metadata.sorted_tables if table.name not in _NOT_COPIED]
    with source.connect() as src, transaction(target, write=True) as dst:
        for table in reversed(tables):
            dst.execute(table.delete())
        for table in tables:
            rows = [dict(row._mapping) for row in src.execute(sa.select(table))]
            if rows:
                dst.execute(table.insert(), rows)
            if target.dialect.name == "postgresql" and "id" in table.c:
                dst.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                    f"(SELECT coalesce(max(id), 0) + 1 FROM {table.name}), false)"
                )
        journal.touch_everything(dst)


def _copies(steps: list[dict[str, Any]]) -> dict[int, list[str]]:
    """The uuids the sandbox gave the copies of a template, per change."""
    found: dict[int, list[str]] = {}
    for step in steps:
        if step["kind"] == "add":
            found.setdefault(step["change"], []).append(step["subject"])
    return found


def _cases() -> list:
    server = [
        pytest.param(backend, seed, marks=mark)
        for backend, mark in (("postgresql", pytest.mark.postgres), ("mysql", pytest.mark.mysql))
        for seed in range(SERVER_CLOUDS)
    ]
    return [("sqlite", seed) for seed in range(CLOUDS)] + server


@pytest.mark.parametrize(("backend", "seed"), _cases())
def test_plans_in_a_sandbox_equal_the_same_steps_for_real(
    backend: str, seed: int, fast_dir: Path
) -> None:
    rng = random.Random(seed)
    settings = Settings.of()
    plans = PLANS if backend == "sqlite" else SERVER_PLANS
    dbs = Databases(backend, fast_dir)
    sandboxed = PlacementClient(create_app(settings, dbs.tried))
    real_index = Index()
    real = PlacementClient(create_app(settings, dbs.real, real_index))
    seen: Counter = Counter()  # (kind, applied, code) of every step
    try:
        cloud = Cloud(sandboxed, rng)
        dbs.keep_pristine()
        afters = _afters(cloud)
        for n in range(plans):
            plan = random_plan(rng, cloud)
            _ok(sandboxed.simulate_get("/allocation_candidates", query_string=AFTER))  # (kept)
            made = _ok(sandboxed.simulate_post("/tally/v1/sandboxes", json={}))
            box = f"/tally/v1/sandboxes/{made['id']}"
            steps = _ok(sandboxed.simulate_post(f"{box}/changes", json={"changes": plan}))
            inside = _ok(sandboxed.simulate_get(f"{box}/amounts"))
            asked = [
                _ok(sandboxed.simulate_get(f"{box}/allocation_candidates", query_string=q))
                for q in afters + afters  # (asked again: from what the sandbox kept)
            ]
            _ok(sandboxed.simulate_delete(box))

            dbs.reset(real_index)
            done = Real(real, _copies(steps["steps"])).run(plan)
            outside = _ok(real.simulate_get("/tally/v1/amounts"))
            answered = [
                _ok(real.simulate_get("/allocation_candidates", query_string=q)) for q in afters
            ]
            where = f"{backend} cloud {seed}, plan {n}: {plan}"
            assert _verdicts(steps["steps"]) == done, where
            assert inside == outside, f"{where}\n{_differ(inside, outside)}"
            assert asked == answered + answered, where
            seen.update((v[0], v[2], v[4]) for v in done)
        # the plans tried both outcomes (a run of only refusals would prove little)
        assert any(applied for _, applied, _ in seen), seen
        assert any(not applied for _, applied, _ in seen), seen
        if os.environ.get("SANDBOX_STATS"):
            print(sorted(seen.items()))
        # the sandboxes left the live cloud as it was
        dbs.reset(real_index)
        live = _ok(sandboxed.simulate_get("/tally/v1/amounts"))
        assert live == _ok(real.simulate_get("/tally/v1/amounts"))
    finally:
        dbs.close()
