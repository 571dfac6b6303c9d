#!/usr/bin/env python3
"""A cloud the size of the largest sites, seeded (issue 31's workload): N compute
hosts, each a tree of a root (VCPU, MEMORY_MB, DISK_GB), two NUMA children, 4-16
device children (PCI devices of CUSTOM_PCI_* classes with traits, a PF with VFs, a
vGPU group) and a network agent with a bandwidth provider; sharing storage by
aggregates (one per 50 hosts); servers filling most hosts 60-90% and a tail of
empty ones (three allocations a server, a few with a device). Written straight into
a database (as bench/candidates.py writes loadgen's); the query shapes of its
requests (device groups, `same_subtree`, `group_policy=isolate`, sharing). Used by
bench/scale.py (the figures) and tests/api/test_scale_cloud.py.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import uuid as uuidlib
from pathlib import Path

import httpx
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from candidates import populate_consumers, populate_providers  # noqa: E402

from tally.config import Settings  # noqa: E402
from tally.placement.app import create_app  # noqa: E402

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


def write_providers(engine: sa.Engine, cloud: Cloud) -> None:
    """The cloud's providers straight into an empty database (its custom classes made
    through the API first: their ids are the ledger's to give)."""
    maker = create_app(Settings.of(candidates_index_max_mb=0), engine)
    with httpx.Client(transport=httpx.WSGITransport(app=maker), base_url="http://x") as api:
        for name in PCI_CLASSES:
            assert api.put(f"/resource_classes/{name}", headers=ADMIN).status_code in (201, 204)
    populate_providers(engine, cloud)


def write_servers(engine: sa.Engine, cloud: Cloud) -> None:
    """The cloud's servers (consumers and allocations), after `write_providers`."""
    populate_consumers(engine, cloud, "project", "user")
