"""The audit's classification and removal over mocked Placement and compute APIs."""

from __future__ import annotations

import json

import httpx

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.doctor import audit

CMP1, CMP2, NUMA, SHARED, GONE = "rp-cmp1", "rp-cmp2", "rp-numa", "rp-nfs", "rp-gone"
PROVIDERS = [
    {"uuid": CMP1, "name": "cmp-1", "root_provider_uuid": CMP1},
    {"uuid": NUMA, "name": "cmp-1_numa0", "root_provider_uuid": CMP1},
    {"uuid": CMP2, "name": "cmp-2", "root_provider_uuid": CMP2},
    {"uuid": SHARED, "name": "nfs", "root_provider_uuid": SHARED},
    {"uuid": GONE, "name": "cmp-9", "root_provider_uuid": GONE},
]
HOLDINGS = {
    CMP1: {"live": {"VCPU": 2}, "orphan": {"CUSTOM_FPGA": 1}, "mig-done": {"VCPU": 1}},
    NUMA: {"live": {"MEMORY_MB": 512}},
    CMP2: {"moving": {"VCPU": 1}, "mig-run": {"VCPU": 1}, "evacuated": {"VCPU": 1}},
    SHARED: {"live": {"DISK_GB": 10}, "orphan": {"DISK_GB": 5}},
    GONE: {"stranded": {"VCPU": 1}, "evacuated": {"VCPU": 1}},
}
SERVERS = {
    "live": "cmp-1",
    "moving": "cmp-1",
    "evacuated": "cmp-2",
    "stranded": "cmp-9",
}
MIGRATIONS = [
    {"uuid": "mig-done", "status": "error", "instance_uuid": "moving-earlier"},
    {"uuid": "mig-run", "status": "running", "instance_uuid": "moving"},
]


def placement_app(writes: list) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/":
            return httpx.Response(200, json={"versions": [{"max_version": "1.39"}]})
        if path == "/resource_providers":
            if request.url.params.get("required") == audit.SHARING_TRAIT:
                return httpx.Response(200, json={"resource_providers": [PROVIDERS[3]]})
            return httpx.Response(200, json={"resource_providers": PROVIDERS})
        if path.endswith("/allocations") and path.startswith("/resource_providers/"):
            rp = path.split("/")[2]
            body = {c: {"resources": r} for c, r in HOLDINGS.get(rp, {}).items()}
            return httpx.Response(200, json={"allocations": body})
        if path.startswith("/allocations/"):
            consumer = path.rsplit("/", 1)[1]
            if request.method == "PUT":
                writes.append((consumer, json.loads(request.content)))
                return httpx.Response(204)
            found = {rp: {"resources": h[consumer]} for rp, h in HOLDINGS.items() if consumer in h}
            return httpx.Response(
                200,
                json={
                    "allocations": found,
                    "consumer_generation": 7,
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_type": "INSTANCE",
                },
            )
        return httpx.Response(404, json={"errors": [{"status": 404, "detail": path}]})

    return httpx.MockTransport(handle)


def compute_app(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path.endswith("/servers/detail"):
        servers = [
            {"id": s, "OS-EXT-SRV-ATTR:host": h, "status": "ACTIVE"} for s, h in SERVERS.items()
        ]
        return httpx.Response(200, json={"servers": servers})
    if path.endswith("/os-migrations"):
        return httpx.Response(200, json={"migrations": MIGRATIONS})
    if path.endswith("/os-hypervisors"):
        found = [
            {"id": CMP1, "hypervisor_hostname": "cmp-1"},
            {"id": CMP2, "hypervisor_hostname": "cmp-2"},
        ]
        return httpx.Response(200, json={"hypervisors": found})
    return httpx.Response(404, json={"itemNotFound": {"message": path}})


def clients(writes: list | None = None) -> tuple[PlacementClient, ComputeClient]:
    placement = PlacementClient(
        "http://placement", transport=placement_app([] if writes is None else writes)
    )
    compute = ComputeClient("http://compute/v2.1", transport=httpx.MockTransport(compute_app))
    return placement, compute


def test_every_consumer_gets_its_class():
    report = audit.audit(*clients())
    kinds = {c.consumer_uuid: c.kind for c in report.consumers}
    assert kinds == {
        "live": "live",  # nested NUMA child and a sharing provider: still one root
        "orphan": "orphan",  # a CUSTOM_ class and a sharing provider count
        "mig-done": "stale-migration",
        "moving": "live",
        "mig-run": "migrating",
        "evacuated": "leaked-host",
        "stranded": "leaked-host",
    }
    assert report.leaked_providers == (GONE,)
    assert report.counts()["orphan"] == 1 and not report.clean
    orphan = next(c for c in report.consumers if c.consumer_uuid == "orphan")
    assert orphan.allocations == {CMP1: {"CUSTOM_FPGA": 1}, SHARED: {"DISK_GB": 5}}


def test_a_double_allocation_needs_no_move_in_progress():
    cloud = audit.Cloud(
        servers={"s": {"host": "a"}},
        migrations={"m": {"status": "running", "instance_uuid": "s"}},
        hypervisors={"A": "a", "B": "b"},
    )
    providers = {"A": {"name": "a", "root": "A"}, "B": {"name": "b", "root": "B"}}
    held = {"s": {"A": {"VCPU": 1}, "B": {"VCPU": 1}}}
    assert audit.classify(held, cloud, providers)[0].kind == "live"
    cloud.migrations["m"]["status"] = "completed"
    assert audit.classify(held, cloud, providers)[0].kind == "double-allocation"


def test_removal_on_one_provider_keeps_the_rest_with_the_generation():
    writes: list = []
    placement, compute = clients(writes)
    report = audit.audit(placement, compute, provider=CMP1)
    assert {c.consumer_uuid for c in report.findings} == {"orphan", "mig-done"}
    dry = audit.remove(placement, report)
    assert writes == [] and not any(r.applied for r in dry.removals)
    done = audit.remove(placement, report, apply=True)
    assert all(r.applied for r in done.removals) and done.clean
    body = dict(writes)["orphan"]
    assert body["allocations"] == {SHARED: {"resources": {"DISK_GB": 5}}}
    assert body["consumer_generation"] == 7 and body["project_id"] == "p"
    assert dict(writes)["mig-done"]["allocations"] == {}


def test_paging_follows_the_links_and_the_marker():
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        marker = request.url.params.get("marker")
        seen.append(marker)
        if marker is None:  # a server whose limit (2) is below ours: it sends a next link
            return httpx.Response(
                200, json={"servers": [{"id": "a"}, {"id": "b"}], "servers_links": []}
            )
        return httpx.Response(200, json={"servers": [{"id": "c"}]})

    compute = ComputeClient("http://c", transport=httpx.MockTransport(handle))
    found = audit.paged(compute, "/servers/detail", "servers", {"all_tenants": 1})
    assert [s["id"] for s in found] == ["a", "b", "c"] and seen == [None, "b"]
