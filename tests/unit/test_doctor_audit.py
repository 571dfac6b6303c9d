"""The audit's classification and removal over mocked Placement and compute APIs."""

from __future__ import annotations

import datetime as dt
import json

import httpx

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.doctor import audit
from tally.doctor.cloud import SHARING_TRAIT, paged

CMP1, CMP2, NUMA, SHARED, GONE = "rp-cmp1", "rp-cmp2", "rp-numa", "rp-nfs", "rp-gone"
PROVIDERS = [
    {"uuid": CMP1, "name": "cmp-1", "root_provider_uuid": CMP1},
    {"uuid": NUMA, "name": "cmp-1_numa0", "root_provider_uuid": CMP1},
    {"uuid": CMP2, "name": "cmp-2", "root_provider_uuid": CMP2},
    {"uuid": SHARED, "name": "nfs", "root_provider_uuid": SHARED},
    {"uuid": GONE, "name": "cmp-9", "root_provider_uuid": GONE},
]
HOLDINGS = {
    CMP1: {
        "live": {"VCPU": 2},
        "orphan": {"CUSTOM_FPGA": 1},
        "mig-done": {"VCPU": 1},
        "double": {"VCPU": 1},
        "misplaced": {"VCPU": 1},
        "mig-old": {"VCPU": 1},
    },
    NUMA: {"live": {"MEMORY_MB": 512}},
    CMP2: {
        "moving": {"VCPU": 1},
        "mig-run": {"VCPU": 1},
        "evacuated": {"VCPU": 1},
        "double": {"VCPU": 1},
        "stuck": {"VCPU": 1},
    },
    SHARED: {"live": {"DISK_GB": 10}, "orphan": {"DISK_GB": 5}},
    GONE: {"stranded": {"VCPU": 1}, "evacuated": {"VCPU": 1}},
}
SERVERS = {
    "live": "cmp-1",
    "moving": "cmp-1",
    "evacuated": "cmp-2",
    "stranded": "cmp-9",
    "double": "cmp-1",
    "misplaced": "cmp-2",
    "empty": "cmp-1",
    "stuck": "cmp-1",
}
RECENT, HOURS_AGO = "2026-12-01T12:00:00.000000", "2026-12-01T08:00:00.000000"
MIGRATIONS = [
    {"id": 1, "uuid": "mig-done", "status": "error", "instance_uuid": "moving-earlier"},
    {"id": 2, "uuid": "mig-run", "status": "running", "instance_uuid": "moving"},
    {
        "id": 3,
        "uuid": "mig-old",
        "status": "running",
        "instance_uuid": "stuck",
        "migration_type": "live-migration",
        "updated_at": HOURS_AGO,
    },
]
NOW = dt.datetime(2026, 12, 1, 12, 30, tzinfo=dt.UTC)


def placement_app(writes: list) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/":
            return httpx.Response(200, json={"versions": [{"max_version": "1.39"}]})
        if path == "/resource_providers":
            if request.url.params.get("required") == SHARING_TRAIT:
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
    if path == "/v2.1/":
        return httpx.Response(200, json={"version": {"id": "v2.1", "version": "2.96"}})
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
    report = audit.audit(*clients(), now=NOW)
    kinds = {c.consumer_uuid: c.kind for c in report.consumers}
    assert kinds == {
        "live": "live",  # nested NUMA child and a sharing provider: still one root
        "orphan": "orphan",  # a CUSTOM_ class and a sharing provider count
        "mig-done": "stale-migration",
        "moving": "live",  # its move is in progress: held on both, tolerated
        "mig-run": "migrating",  # no updated_at: never called stuck
        "mig-old": "stuck-migration",  # running, last updated 4h30 ago
        "stuck": "live",
        "evacuated": "leaked-host",
        "stranded": "leaked-host",
        "double": "double-allocation",  # its host and another, no move going
        "misplaced": "misplaced",  # runs on cmp-2, held on cmp-1 only
        "empty": "unallocated",  # ACTIVE on cmp-1, holds nothing
    }
    assert report.leaked_providers == (GONE,)
    assert report.counts()["orphan"] == 1 and not report.all_fixed
    found = {c.consumer_uuid: c for c in report.consumers}
    assert found["orphan"].allocations == {CMP1: {"CUSTOM_FPGA": 1}, SHARED: {"DISK_GB": 5}}
    assert found["mig-old"].fix == (
        "openstack --os-compute-api-version 2.24 server migration abort stuck 3"
    )
    assert "4h 30m" in found["mig-old"].reason
    assert found["misplaced"].fix == "tally heal --instance misplaced --apply"
    assert found["double"].fix == f"tally audit --provider {CMP2} --delete --apply"
    assert found["empty"].fix == "tally heal --instance empty --apply"
    # a longer patience: the same move is only migrating
    patient = audit.audit(*clients(), stuck_after=dt.timedelta(hours=5), now=NOW)
    assert {c.consumer_uuid: c.kind for c in patient.consumers}["mig-old"] == "migrating"


def test_removal_on_one_provider_keeps_the_rest_with_the_generation():
    writes: list = []
    placement, compute = clients(writes)
    report = audit.audit(placement, compute, provider=CMP1, now=NOW)
    removable = {c.consumer_uuid for c in report.findings if audit.removable(report, c)}
    assert removable == {"orphan", "mig-done"}  # the double's part here is on its host
    dry = audit.remove(placement, report)
    assert writes == [] and not any(w.applied for w in dry.writes)
    assert {w.target for w in dry.writes} == {"orphan", "mig-done"}
    done = audit.remove(placement, report, apply=True)
    assert all(w.applied for w in done.writes)
    body = dict(writes)["orphan"]
    assert body["allocations"] == {SHARED: {"resources": {"DISK_GB": 5}}}
    assert body["consumer_generation"] == 7 and body["project_id"] == "p"
    assert dict(writes)["mig-done"]["allocations"] == {}


def test_a_double_allocation_is_freed_off_its_host_only():
    writes: list = []
    placement, compute = clients(writes)
    report = audit.audit(placement, compute, provider=CMP2, now=NOW)
    done = audit.remove(placement, report, apply=True)
    freed = {w.target: w.freed for w in done.writes}
    assert freed["double"] == {CMP2: {"VCPU": 1}}
    assert dict(writes)["double"]["allocations"] == {CMP1: {"resources": {"VCPU": 1}}}


def test_a_leaked_provider_is_freed_then_deleted_and_the_dry_run_says_so():
    writes: list = []
    placement, compute = clients(writes)
    report = audit.audit(placement, compute, provider=GONE, now=NOW)
    dry = audit.remove(placement, report)
    assert [(w.target, w.delete_provider) for w in dry.writes] == [
        ("evacuated", False),
        ("stranded", False),
        (GONE, True),  # listed, though not written
    ]
    assert writes == []


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

    compute = ComputeClient("http://c", version="2.96", transport=httpx.MockTransport(handle))
    found = paged(compute, "/servers/detail", "servers", {"all_tenants": 1})
    assert [s["id"] for s in found] == ["a", "b", "c"] and seen == [None, "b"]
