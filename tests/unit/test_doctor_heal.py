"""Which servers heal looks at, over mocked Placement and compute APIs."""

from __future__ import annotations

import httpx

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.doctor import audit, heal

CMP1 = "rp-cmp1"
FLAVOR = {"vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0, "extra_specs": {}}
# servers on cmp-1 holding nothing: (status, task_state)
SERVERS = {"idle": ("ACTIVE", None), "deleting": ("ACTIVE", "deleting")}


def placement_app(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path == "/":
        return httpx.Response(200, json={"versions": [{"max_version": "1.39"}]})
    if path == "/resource_providers":
        sharing = request.url.params.get("required")
        found = [] if sharing else [{"uuid": CMP1, "name": "cmp-1", "root_provider_uuid": CMP1}]
        return httpx.Response(200, json={"resource_providers": found})
    if path.endswith("/allocations") and path.startswith("/resource_providers/"):
        return httpx.Response(200, json={"allocations": {}})
    if path.startswith("/allocations/"):
        return httpx.Response(200, json={"allocations": {}, "consumer_generation": None})
    return httpx.Response(404, json={"errors": [{"status": 404, "detail": path}]})


def compute_app(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path == "/v2.1/":
        return httpx.Response(200, json={"version": {"id": "v2.1", "version": "2.96"}})
    if path.endswith("/servers/detail"):
        servers = [
            {
                "id": server,
                "status": status,
                "OS-EXT-SRV-ATTR:host": "cmp-1",
                "OS-EXT-SRV-ATTR:hypervisor_hostname": "cmp-1",
                "OS-EXT-STS:task_state": task,
                "flavor": FLAVOR,
                "image": {"id": "cirros"},
            }
            for server, (status, task) in SERVERS.items()
        ]
        return httpx.Response(200, json={"servers": servers})
    if path.endswith("/os-migrations"):
        return httpx.Response(200, json={"migrations": []})
    if path.endswith("/os-hypervisors"):
        found = [{"id": CMP1, "hypervisor_hostname": "cmp-1"}]
        return httpx.Response(200, json={"hypervisors": found})
    return httpx.Response(404, json={"itemNotFound": {"message": path}})


def clients() -> tuple[PlacementClient, ComputeClient]:
    placement = PlacementClient("http://placement", transport=httpx.MockTransport(placement_app))
    compute = ComputeClient("http://compute/v2.1", transport=httpx.MockTransport(compute_app))
    return placement, compute


def test_a_server_in_a_task_state_is_left_to_nova():
    report = heal.heal(*clients())
    # the one being deleted would be an orphan the moment its delete ends
    assert [(h.server, h.action) for h in report.healings] == [("idle", heal.CREATE)]
    assert report.healings[0].allocations == {CMP1: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}
    assert report.checked == 2


def test_a_soft_deleted_server_keeps_its_allocations(monkeypatch):
    """Restorable until reclaimed, so Nova keeps what it holds: holding nothing, it is
    unallocated and healed like any other; shelved and offloaded, it holds nothing."""
    servers = {"restorable": ("SOFT_DELETED", None), "shelved": ("SHELVED_OFFLOADED", None)}
    monkeypatch.setattr(f"{__name__}.SERVERS", servers)  # what the compute API lists
    report = heal.heal(*clients())
    assert [(h.server, h.action) for h in report.healings] == [("restorable", heal.CREATE)]
    found = audit.audit(*clients())
    assert {f.consumer_uuid: f.kind for f in found.findings} == {"restorable": audit.UNALLOCATED}
