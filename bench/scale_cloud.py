#!/usr/bin/env python3
"""A cloud the size of the largest sites, seeded (issue 31's workload): N compute
hosts, each a tree of a root (VCPU, MEMORY_MB, DISK_GB), two NUMA children, 4-16
device children (PCI devices of CUSTOM_PCI_* classes with traits, a PF with VFs, a
vGPU group) and a network agent with a bandwidth provider; sharing storage by
aggregates (one per 50 hosts); servers filling most hosts 60-90% and a tail of
empty ones (three allocations a server, a few with a device). Written straight into
a database (as bench/candidates.py writes loadgen's), then it prints the sizes,
the in-memory index's load time and memory (per provider, per allocation), its
catch-up after 1,000 claims, and `GET /allocation_candidates` p50 for each shape
(device groups, `same_subtree`, `group_policy=isolate`), with and without `limit`.

  .venv/bin/python bench/scale_cloud.py --hosts 700          # ~10,000 providers
  .venv/bin/python bench/scale_cloud.py --hosts 6700 -k 5    # ~100,000 providers
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import random
import statistics
import sys
import tempfile
import time
import uuid as uuidlib
from pathlib import Path

import falcon.testing
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from candidates import populate  # noqa: E402

from tally.config import Settings  # noqa: E402
from tally.db.engine import make_engine  # noqa: E402
from tally.placement.app import create_app  # noqa: E402
from tally.placement.ledger.bootstrap import prepare_database  # noqa: E402

PCI_CLASSES = [
    f"CUSTOM_PCI_{vendor}_{product}" for vendor in ("8086", "10DE") for product in ("1", "2", "3")
]
ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
SHAPES = {
    "simple": "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20",
    "pci_device": (
        "resources=VCPU:2,MEMORY_MB:4096&resources1=CUSTOM_PCI_8086_1:1&required1=CUSTOM_PCI_FAST"
    ),
    "vf_bandwidth": (
        "resources=VCPU:2,MEMORY_MB:4096&resources_VF=SRIOV_NET_VF:1"
        "&resources_BW=NET_BW_EGR_KILOBIT_PER_SEC:1000&same_subtree=_VF,_BW&group_policy=none"
    ),
    "vgpu": "resources=VCPU:4,MEMORY_MB:8192&resources1=VGPU:1",
    "six_devices_isolate": (
        "resources=VCPU:1&"
        + "&".join(f"resources{i}={rc}:1" for i, rc in enumerate(PCI_CLASSES, start=1))
        + "&group_policy=isolate"
    ),
    "shared_disk": "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:100&member_of=in:",
}


class Said(logging.Handler):
    """Keeps the index's load line."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        if "index loaded" in record.getMessage():
            self.lines.append(record.getMessage())


@dataclasses.dataclass
class Provider:
    uuid: str
    name: str
    parent: Provider | None = None
    root: Provider | None = None
    inventories: dict = dataclasses.field(default_factory=dict)
    traits: list = dataclasses.field(default_factory=list)
    aggregates: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Cloud:
    providers: list[Provider]
    prepop: list[tuple[str, dict]]  # (consumer, {provider uuid: {"resources": {...}}})
    aggregates: list[str]


def generate(hosts: int, seed: int) -> Cloud:
    rnd = random.Random(seed)
    ids = (str(uuidlib.UUID(int=rnd.getrandbits(128), version=4)) for _ in iter(int, 1))
    providers: list[Provider] = []
    prepop: list[tuple[str, dict]] = []
    aggregates: list[str] = []

    def add(name: str, parent: Provider | None, **fields: object) -> Provider:
        p = Provider(next(ids), name, parent, **fields)
        p.root = parent.root if parent else p
        providers.append(p)
        return p

    for h in range(hosts):
        if h % 50 == 0:
            agg = next(ids)
            aggregates.append(agg)
            share = add(f"storage-{h // 50}", None, traits=["MISC_SHARES_VIA_AGGREGATE"])
            share.inventories = {"DISK_GB": {"total": 100_000}}
            share.aggregates = [agg]
        root = add(f"compute-{h}", None, aggregates=[aggregates[-1]])
        root.inventories = {
            "VCPU": {"total": 64, "allocation_ratio": 4.0},
            "MEMORY_MB": {"total": 262_144, "allocation_ratio": 1.5},
            "DISK_GB": {"total": 2_000},
        }
        for n in range(2):
            add(f"compute-{h}-numa{n}", root, traits=["HW_NUMA_ROOT"])
        devices = []
        for d in range(rnd.randint(2, 12)):
            rc = rnd.choice(PCI_CLASSES)
            traits = ["CUSTOM_PCI_FAST"] if d % 2 == 0 else []
            devices.append(
                add(f"compute-{h}-pci{d}", root, inventories={rc: {"total": 1}}, traits=traits)
            )
        pf = add(
            f"compute-{h}-pf0",
            root,
            inventories={
                "SRIOV_NET_VF": {"total": 8},
                "NET_BW_EGR_KILOBIT_PER_SEC": {"total": 25_000_000},
            },
        )
        pf.traits = ["CUSTOM_PHYSNET_DATA"]
        add(f"compute-{h}-vgpu", root, inventories={"VGPU": {"total": 4}})
        agent = add(f"compute-{h}-agent", root, traits=["CUSTOM_VNIC_TYPE_NORMAL"])
        add(
            f"compute-{h}-bw",
            agent,
            inventories={"NET_BW_EGR_KILOBIT_PER_SEC": {"total": 10_000_000}},
        )
        # most hosts 60-90% full (by VCPU), a tail of empty ones
        fill = 0.0 if rnd.random() < 0.1 else rnd.uniform(0.6, 0.9)
        vcpus = int(64 * 4.0 * fill)
        while vcpus > 0:
            size = rnd.choice((1, 2, 4, 8))
            held = {
                root.uuid: {"resources": {"VCPU": size, "MEMORY_MB": size * 1024, "DISK_GB": 20}}
            }
            if devices and rnd.random() < 0.05:
                device = devices.pop(0)  # a device serves one server
                held[device.uuid] = {"resources": dict.fromkeys(device.inventories, 1)}
            prepop.append((next(ids), held))
            vcpus -= size
    return Cloud(providers, prepop, aggregates)


def timed(client: falcon.testing.TestClient, query: str, k: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(k):
        started = time.perf_counter()
        answer = client.simulate_get("/allocation_candidates", query_string=query)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text
        count = len(answer.json["allocation_requests"])
    return statistics.median(times), count


def catch_up(client: falcon.testing.TestClient, cloud: Cloud, k: int) -> None:
    """1,000 claims through the API (spread over the hosts), then the search that
    catches the index up with them; each claim released after."""
    roots = [p for p in cloud.providers if p.parent is None and "VCPU" in p.inventories]
    claims = [str(uuidlib.uuid4()) for _ in range(1000)]
    started = time.perf_counter()
    for n, consumer in enumerate(claims):
        body = {
            "allocations": {roots[n * 7 % len(roots)].uuid: {"resources": {"VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        client.simulate_put(f"/allocations/{consumer}", json=body)
    claimed = time.perf_counter() - started
    started = time.perf_counter()
    client.simulate_get("/allocation_candidates", query_string="resources=VCPU:1&limit=1")
    caught = (time.perf_counter() - started) * 1000
    print(f"# 1,000 claims: {1000 / claimed:.0f}/s; the next search caught up in {caught:.1f} ms")
    for consumer in claims:
        client.simulate_delete(f"/allocations/{consumer}")
    client.simulate_get("/allocation_candidates", query_string="resources=VCPU:1&limit=1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=700)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--database-url", help="an empty database (default: a new SQLite)")
    parser.add_argument(
        "--no-servers", action="store_true", help="no allocations (the index's cost per provider)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    cloud = generate(args.hosts, args.seed)
    if args.no_servers:
        cloud.prepop.clear()
    allocations = sum(len(r["resources"]) for _, held in cloud.prepop for r in held.values())
    print(
        f"# {args.hosts} hosts: {len(cloud.providers)} providers, {len(cloud.prepop)} consumers, "
        f"{allocations} allocations (generated in {time.perf_counter() - started:.1f} s)"
    )
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='tally-scale-')}/scale.sqlite"
    engine = make_engine(url)
    prepare_database(engine)
    maker = create_app(Settings.of(candidates_index_max_mb=0), engine)
    with httpx.Client(transport=httpx.WSGITransport(app=maker), base_url="http://x") as api:
        for name in PCI_CLASSES:  # custom classes through the API (ids are the ledger's)
            assert api.put(f"/resource_classes/{name}", headers=ADMIN).status_code in (201, 204)
    started = time.perf_counter()
    populate(engine, cloud, "project", "user")
    print(f"# written in {time.perf_counter() - started:.1f} s")
    app = create_app(Settings.of(candidates_index_max_mb=8192), engine)
    client = falcon.testing.TestClient(
        app, headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    )
    said: list[str] = []
    logging.getLogger("tally").addHandler(Said(said))
    logging.getLogger("tally").setLevel(logging.INFO)
    started = time.perf_counter()
    client.simulate_get("/allocation_candidates", query_string="resources=VCPU:1&limit=1")
    load = time.perf_counter() - started
    print(f"# index: first search {load:.2f} s, the load included: {'; '.join(said)}")
    mib = float(said[0].rsplit("(", 1)[1].split()[0]) if said else 0.0
    per = f"{mib * 2**20 / len(cloud.providers):.0f} B a provider"
    if allocations:
        per += f", or {mib * 2**20 / allocations:.0f} B an allocation (each all of it)"
    print(f"# index memory: {per}")
    catch_up(client, cloud, args.k)
    shapes = dict(SHAPES)
    shapes["shared_disk"] += ",".join(cloud.aggregates[:3])
    print(f"{'shape':<22} {'limit=50 p50 ms':>16} {'n':>6} {'whole p50 ms':>13} {'n':>8}")
    for name, query in shapes.items():
        limited, n_limited = timed(client, query + "&limit=50", args.k)
        whole, n_whole = timed(client, query, max(1, args.k // 2))
        print(f"{name:<22} {limited:>16.1f} {n_limited:>6} {whole:>13.1f} {n_whole:>8}")


if __name__ == "__main__":
    main()
