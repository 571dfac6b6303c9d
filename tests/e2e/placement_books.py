"""A small cloud's Placement books, written through the Placement API (of upstream
Placement, in the move tests), and the reads Nova and an operator make of them.

The cloud:

    cn1 (VCPU 16 x4.0, MEMORY_MB 32768 r512 x1.5 min16 max16384 step16; AVX2, RAID; agg1, agg2)
     +- cn1-numa0 (VCPU 8, MEMORY_MB 16384; HW_NUMA_ROOT)
     |   +- cn1-pf0 (SRIOV_NET_VF 8, CUSTOM_FPGA 2; FAST_NET, HW_NIC_SRIOV)
     +- cn1-numa1 (VCPU 8, MEMORY_MB 16384; HW_NUMA_ROOT)
    cn2 (VCPU 8, MEMORY_MB 8192, DISK_GB 100, CUSTOM_GPU 2; AVX2; agg1)
    cn3 (VCPU 4 -> shrunk to 2 under 4 used: over capacity; agg2)
    ss1 (DISK_GB 1000 r100; MISC_SHARES_VIA_AGGREGATE; agg1): shares disk with cn1, cn2

Consumers: INSTANCE and MIGRATION ones, one written at 1.28 (no type: `unknown`), in
two projects and three users; one rewritten twice (consumer generation 3).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

NS = uuid.UUID("8f3f3f0e-2b7a-4c55-9d59-1c8b5a0e6d21")
LATEST = "1.39"


def uid(name: str) -> str:
    return str(uuid.uuid5(NS, name))


AGG1, AGG2 = uid("agg1"), uid("agg2")
PROVIDERS = ("cn1", "cn1-numa0", "cn1-numa1", "cn1-pf0", "cn2", "cn3", "ss1")
CONSUMERS = ("inst1", "inst2", "inst3", "inst4", "mig1", "inst5")


class Api:
    """An admin (noauth) Placement client that fails loudly on a refused write."""

    def __init__(self, url: str, transport: httpx.BaseTransport | None = None) -> None:
        self.http = httpx.Client(base_url=url, timeout=30, trust_env=False, transport=transport)

    def call(self, method: str, path: str, body: Any = None, version: str = LATEST) -> Any:
        headers = {"x-auth-token": "admin", "openstack-api-version": f"placement {version}"}
        return self.http.request(method, path, json=body, headers=headers)

    def write(self, method: str, path: str, body: Any = None, version: str = LATEST) -> Any:
        answer = self.call(method, path, body, version)
        assert answer.status_code < 300, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json() if answer.content else None

    def generation(self, name: str) -> int:
        return self.write("GET", f"/resource_providers/{uid(name)}")["generation"]

    def provider(self, name: str, parent: str | None = None, **inventories: dict) -> None:
        body = {"name": name, "uuid": uid(name)}
        if parent:
            body["parent_provider_uuid"] = uid(parent)
        self.write("POST", "/resource_providers", body)
        self.inventories(name, **inventories)

    def inventories(self, name: str, **inventories: dict) -> None:
        body = {"resource_provider_generation": self.generation(name), "inventories": inventories}
        self.write("PUT", f"/resource_providers/{uid(name)}/inventories", body)

    def traits(self, name: str, *traits: str) -> None:
        body = {"resource_provider_generation": self.generation(name), "traits": list(traits)}
        self.write("PUT", f"/resource_providers/{uid(name)}/traits", body)

    def aggregates(self, name: str, *aggregates: str) -> None:
        body = {"resource_provider_generation": self.generation(name), "aggregates": aggregates}
        self.write("PUT", f"/resource_providers/{uid(name)}/aggregates", body)

    def allocate(
        self, consumer: str, project: str, user: str, kind: str | None, **on: dict
    ) -> None:
        current = self.write("GET", f"/allocations/{uid(consumer)}")
        body = {
            "allocations": {uid(rp): {"resources": res} for rp, res in on.items()},
            "project_id": project,
            "user_id": user,
            "consumer_generation": current.get("consumer_generation"),
        }
        if kind:
            body["consumer_type"] = kind
        self.write("PUT", f"/allocations/{uid(consumer)}", body, LATEST if kind else "1.28")


def populate(api: Api) -> None:
    api.write("POST", "/resource_classes", {"name": "CUSTOM_GPU"})
    api.write("POST", "/resource_classes", {"name": "CUSTOM_FPGA"})
    api.write("PUT", "/traits/CUSTOM_RAID")
    api.write("PUT", "/traits/CUSTOM_FAST_NET")
    memory = {
        "total": 32768,
        "reserved": 512,
        "allocation_ratio": 1.5,
        "min_unit": 16,
        "max_unit": 16384,
        "step_size": 16,
    }
    api.provider("cn1", VCPU={"total": 16, "allocation_ratio": 4.0}, MEMORY_MB=memory)
    for numa in ("cn1-numa0", "cn1-numa1"):
        api.provider(numa, "cn1", VCPU={"total": 8}, MEMORY_MB={"total": 16384})
        api.traits(numa, "HW_NUMA_ROOT")
    api.provider("cn1-pf0", "cn1-numa0", SRIOV_NET_VF={"total": 8}, CUSTOM_FPGA={"total": 2})
    api.traits("cn1-pf0", "CUSTOM_FAST_NET", "HW_NIC_SRIOV")
    api.traits("cn1", "HW_CPU_X86_AVX2", "CUSTOM_RAID")
    api.aggregates("cn1", AGG1, AGG2)
    api.provider(
        "cn2",
        VCPU={"total": 8},
        MEMORY_MB={"total": 8192},
        DISK_GB={"total": 100},
        CUSTOM_GPU={"total": 2},
    )
    api.traits("cn2", "HW_CPU_X86_AVX2")
    api.aggregates("cn2", AGG1)
    api.provider("cn3", VCPU={"total": 4})
    api.aggregates("cn3", AGG2)
    api.provider("ss1", DISK_GB={"total": 1000, "reserved": 100})
    api.traits("ss1", "MISC_SHARES_VIA_AGGREGATE")
    api.aggregates("ss1", AGG1)

    api.allocate("inst1", "p1", "u1", "INSTANCE", cn2={"VCPU": 2, "MEMORY_MB": 2048},
                 ss1={"DISK_GB": 20})  # fmt: skip
    api.allocate("inst2", "p1", "u2", "INSTANCE", **{"cn1-numa0": {"VCPU": 2, "MEMORY_MB": 1024},
                 "cn1-pf0": {"SRIOV_NET_VF": 1}})  # fmt: skip
    api.allocate("inst3", "p2", "u3", None, cn3={"VCPU": 4})  # at 1.28: type unknown
    api.allocate("inst4", "p2", "u3", "INSTANCE", cn2={"CUSTOM_GPU": 1})
    api.allocate("inst4", "p2", "u3", "INSTANCE", cn2={"CUSTOM_GPU": 1, "VCPU": 1})
    api.allocate("inst4", "p2", "u3", "INSTANCE", cn2={"CUSTOM_GPU": 1, "VCPU": 2},
                 ss1={"DISK_GB": 10})  # fmt: skip
    api.write(  # two consumers in one request, as Nova moves a server
        "POST",
        "/allocations",
        {
            uid("mig1"): {
                "allocations": {uid("cn1"): {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
                "project_id": "p1",
                "user_id": "u1",
                "consumer_generation": None,
                "consumer_type": "MIGRATION",
            },
            uid("inst5"): {
                "allocations": {uid("cn1-numa1"): {"resources": {"VCPU": 1}}},
                "project_id": "p1",
                "user_id": "u1",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        },
    )
    # upstream lets a shrink leave usage above capacity (4 VCPU used, capacity 2)
    api.inventories("cn3", VCPU={"total": 2})


def reads() -> list[tuple[str, str]]:
    """(microversion, path) of every read compared."""
    rp = "/resource_providers"
    out = [
        (LATEST, rp),
        ("1.14", rp),
        (LATEST, f"{rp}?in_tree={uid('cn1-numa1')}"),
        (LATEST, f"{rp}?member_of={AGG1}"),
        (LATEST, f"{rp}?member_of=in:{AGG1},{AGG2}"),
        (LATEST, f"{rp}?member_of=!{AGG2}"),
        (LATEST, f"{rp}?required=HW_CPU_X86_AVX2"),
        (LATEST, f"{rp}?required=!CUSTOM_RAID"),
        (LATEST, f"{rp}?resources=VCPU:2,MEMORY_MB:1024"),
        (LATEST, f"{rp}?resources=VCPU:1"),
        (LATEST, f"{rp}?name=cn2"),
        (LATEST, f"{rp}?uuid={uid('cn3')}"),
        (LATEST, "/traits"),
        (LATEST, "/traits?name=startswith:CUSTOM_"),
        (LATEST, "/traits?associated=true"),
        (LATEST, "/resource_classes"),
        (LATEST, "/resource_classes/CUSTOM_GPU"),
        (LATEST, "/usages?project_id=p1"),
        (LATEST, "/usages?project_id=p1&user_id=u1"),
        (LATEST, "/usages?project_id=p2"),
        (LATEST, "/usages?project_id=p2&consumer_type=INSTANCE"),
        (LATEST, "/usages?project_id=p2&consumer_type=unknown"),
        ("1.9", "/usages?project_id=p2"),
    ]
    for name in PROVIDERS:
        base = f"{rp}/{uid(name)}"
        for tail in ("", "/inventories", "/aggregates", "/traits", "/usages", "/allocations"):
            out.append((LATEST, base + tail))
        out.append(("1.0", base))
    out.append((LATEST, f"{rp}/{uid('cn1')}/inventories/MEMORY_MB"))
    for name in (*CONSUMERS, "nobody"):
        out.append((LATEST, f"/allocations/{uid(name)}"))
        out.append(("1.12", f"/allocations/{uid(name)}"))
    ac = "/allocation_candidates?"
    for query in (
        "resources=VCPU:1,MEMORY_MB:512",
        "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
        "resources=VCPU:1&required=HW_CPU_X86_AVX2",
        "resources=VCPU:1&required=!CUSTOM_RAID",
        "resources=DISK_GB:50",
        "resources=CUSTOM_GPU:1&member_of=" + AGG1,
        "resources=VCPU:2",
        "resources=VCPU:1&in_tree=" + uid("cn1"),
        "resources=VCPU:1&root_required=!CUSTOM_RAID",
        "resources1=VCPU:1,MEMORY_MB:512&resources2=SRIOV_NET_VF:1&group_policy=isolate",
        "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
        "resources1=VCPU:1&resources2=CUSTOM_FPGA:1&required2=CUSTOM_FAST_NET"
        "&group_policy=none&same_subtree=_1,_2",
        "resources=VCPU:100",
    ):
        out.append((LATEST, ac + query))
    out.append(("1.10", ac + "resources=VCPU:1,MEMORY_MB:512"))
    out.append(("1.29", ac + "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"))
    return out


def normal(value: Any) -> Any:
    """Order-free: every list sorted (by its items' JSON); floats as floats."""
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [normal(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def answers(url: str, transport: httpx.BaseTransport | None = None) -> dict[str, tuple]:
    """Every read's status and (order-free) body."""
    api = Api(url, transport)
    found = {}
    for version, path in reads():
        answer = api.call("GET", path, version=version)
        body = answer.json() if answer.status_code < 300 else None
        found[f"{version} {path}"] = (answer.status_code, normal(body))
    return found


def differences(upstream: dict, tally: dict) -> list[str]:
    """Reads answered differently. Where upstream itself fails (a 500) the read is
    left out: upstream 16.0.0 on PostgreSQL fails GET /usages from 1.38 (a GROUP BY
    PostgreSQL refuses); `upstream_failures` lists those."""
    return [
        f"{key}:\n  upstream {upstream[key]}\n  tally    {tally.get(key)}"
        for key in upstream
        if upstream[key] != tally.get(key) and upstream[key][0] != 500
    ]


def upstream_failures(upstream: dict) -> list[str]:
    return [key for key, (status, _) in upstream.items() if status >= 500]
