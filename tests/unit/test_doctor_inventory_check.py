"""The inventory pre-check, over an httpx.MockTransport: no server, no database.

The fake answers the five reads the doctor makes, from a small in-memory cloud:

    compute-1 (RP)  VCPU total 32       <- server-a holds 12, server-b 6, migration-c 2
                    MEMORY_MB 4096      <- server-a holds 1024
                    DISK_GB 100         (nothing holds it)
    compute-2 (RP2) VCPU total 16       <- migration-c holds 2 here too (a move in flight)
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor.inventory_check import (
    capacity,
    check_change,
    explain_refusal,
    largest_safe_reserved,
    smallest_safe_total,
)

RP = "6f0c3b4e-8d3a-4a55-9c2e-0e1f5a7a4d10"
RP2 = "7a1d4c5f-9e4b-4b66-8d3f-1f2a6b8b5e21"
SERVER_A = "aaaaaaaa-0000-4000-8000-000000000001"
SERVER_B = "bbbbbbbb-0000-4000-8000-000000000002"
MIGRATION_C = "cccccccc-0000-4000-8000-000000000003"


def record(total: int, reserved: int = 0, ratio: float = 1.0) -> dict[str, Any]:
    return {
        "total": total,
        "reserved": reserved,
        "min_unit": 1,
        "max_unit": total,
        "step_size": 1,
        "allocation_ratio": ratio,
    }


class FakePlacement:
    """The read side of Placement 1.39 for the cloud drawn above; counts requests."""

    def __init__(self) -> None:
        self.names = {RP: "compute-1", RP2: "compute-2"}
        self.inventories = {
            RP: {"VCPU": record(32), "MEMORY_MB": record(4096), "DISK_GB": record(100)},
            RP2: {"VCPU": record(16)},
        }
        self.consumers = {
            SERVER_A: ("INSTANCE", "demo", {RP: {"VCPU": 12, "MEMORY_MB": 1024}}),
            SERVER_B: ("INSTANCE", "ops", {RP: {"VCPU": 6}}),
            MIGRATION_C: ("MIGRATION", "demo", {RP: {"VCPU": 2}, RP2: {"VCPU": 2}}),
        }
        self.requests: list[tuple[str, str]] = []

    def held_on(self, rp: str) -> dict[str, dict[str, int]]:
        return {c: held[rp] for c, (_, _, held) in self.consumers.items() if rp in held}

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append((request.method, path))
        if request.method != "GET":
            return httpx.Response(405, json={"errors": [{"status": 405, "detail": "no"}]})
        if path == "/":
            return httpx.Response(200, json={"versions": [{"max_version": "1.39"}]})
        if match := re.fullmatch(r"/allocations/([^/]+)", path):
            return self.consumer(match.group(1))
        match = re.fullmatch(r"/resource_providers/([^/]+)(/\w+)?", path)
        rp, tail = match.group(1), match.group(2)
        if tail is None:
            return httpx.Response(200, json={"uuid": rp, "name": self.names[rp], "generation": 5})
        if tail == "/inventories":
            body = {"resource_provider_generation": 5, "inventories": self.inventories[rp]}
            return httpx.Response(200, json=body)
        held = self.held_on(rp)
        if tail == "/usages":
            used = {rc: 0 for rc in self.inventories[rp]}
            for resources in held.values():
                for rc, n in resources.items():
                    used[rc] += n
            return httpx.Response(200, json={"usages": used})
        allocations = {c: {"resources": res} for c, res in held.items()}
        return httpx.Response(200, json={"allocations": allocations})

    def consumer(self, uuid: str) -> httpx.Response:
        if uuid not in self.consumers:
            return httpx.Response(200, json={"allocations": {}})
        kind, project, held = self.consumers[uuid]
        body = {
            "allocations": {rp: {"generation": 5, "resources": res} for rp, res in held.items()},
            "project_id": project,
            "user_id": "alice",
            "consumer_generation": 1,
            "consumer_type": kind,
        }
        return httpx.Response(200, json=body)


@pytest.fixture
def fake() -> FakePlacement:
    return FakePlacement()


@pytest.fixture
def client(fake: FakePlacement) -> PlacementClient:
    return PlacementClient("http://placement", transport=httpx.MockTransport(fake.handle))


def asked(fake: FakePlacement, **changes: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The provider's inventory with some classes changed (None removes one)."""
    result = {rc: dict(r) for rc, r in fake.inventories[RP].items()}
    for rc, new in changes.items():
        if new is None:
            result.pop(rc)
        else:
            result[rc] = new
    return result


def test_a_shrink_below_usage_is_refused_naming_holders_largest_first(fake, client):
    check = check_change(client, RP, asked(fake, VCPU=record(32, reserved=16)))

    assert not check.ok
    assert check.provider_name == "compute-1"
    assert check.generation == 5
    (vcpu,) = check.refused
    assert (vcpu.resource_class, vcpu.used, vcpu.capacity_now) == ("VCPU", 20, 32)
    assert (vcpu.capacity_asked, vcpu.gap, vcpu.consumers) == (16, 4, 3)
    assert [(h.consumer, h.amount) for h in vcpu.holders] == [
        (SERVER_A, 12),
        (SERVER_B, 6),
        (MIGRATION_C, 2),
    ]
    a, b, c = vcpu.holders
    assert (a.consumer_type, a.project_id, a.user_id, a.also_elsewhere) == (
        "INSTANCE",
        "demo",
        "alice",
        False,
    )
    assert (b.project_id, b.also_elsewhere) == ("ops", False)
    assert (c.consumer_type, c.other_providers) == ("MIGRATION", (RP2,))
    assert vcpu.safe_reserved == 12  # (32 - 12) * 1.0 = 20 >= 20 used
    assert vcpu.safe_total == 36  # at reserved 16, total 36 keeps 20
    # the other classes are reported as unchanged and fine
    assert {c.resource_class: c.refused for c in check.classes} == {
        "DISK_GB": False,
        "MEMORY_MB": False,
        "VCPU": True,
    }


def test_the_suggestions_are_the_commands_that_resolve_it(fake, client):
    check = check_change(client, RP, asked(fake, VCPU=record(32, reserved=16)))
    commands = [s.command for s in check.suggestions]

    assert commands[0] == f"tally provider inventory set {RP} --amend --resource VCPU=32:12"
    assert f"tally provider allocation unset {SERVER_A} --provider {RP}" in commands
    assert f"tally provider allocation unset {MIGRATION_C} --provider {RP}" in commands
    assert commands[-1] == f"tally audit --provider {RP}"
    migration = next(s for s in check.suggestions if s.command and MIGRATION_C in s.command)
    assert "another provider" in migration.text


def test_the_check_only_reads(fake, client):
    check_change(client, RP, asked(fake, VCPU=record(32, reserved=16)))

    assert {method for method, _ in fake.requests} == {"GET"}
    paths = [path for _, path in fake.requests]
    assert f"/resource_providers/{RP}/usages" in paths
    assert f"/resource_providers/{RP}/allocations" in paths
    assert {f"/allocations/{c}" for c in (SERVER_A, SERVER_B, MIGRATION_C)} <= set(paths)


def test_a_change_that_keeps_capacity_above_usage_is_fine_and_reads_no_holders(fake, client):
    check = check_change(client, RP, asked(fake, VCPU=record(32, reserved=12)))

    assert check.ok
    assert check.suggestions == ()
    assert not any("/allocations" in path for _, path in fake.requests)


def test_growing_or_keeping_an_already_short_class_is_never_refused(fake, client):
    fake.inventories[RP]["VCPU"] = record(16)  # already over-committed: 20 used
    assert check_change(client, RP, asked(fake, VCPU=record(16))).ok
    assert check_change(client, RP, asked(fake, VCPU=record(18))).ok
    assert not check_change(client, RP, asked(fake, VCPU=record(15))).ok


def test_allocation_ratio_counts(fake, client):
    assert check_change(client, RP, asked(fake, VCPU=record(4, ratio=5.0))).ok  # 20 >= 20
    check = check_change(client, RP, asked(fake, VCPU=record(4, reserved=1, ratio=5.0)))
    (vcpu,) = check.refused
    assert (vcpu.capacity_asked, vcpu.gap, vcpu.safe_reserved) == (15, 5, 0)


def test_removing_a_class_in_use_is_refused_but_an_unused_one_is_not(fake, client):
    check = check_change(client, RP, asked(fake, MEMORY_MB=None, DISK_GB=None))

    (memory,) = check.refused
    assert memory.removed and memory.capacity_asked is None
    assert (memory.used, memory.gap, memory.safe_reserved) == (1024, 1024, None)
    assert [h.consumer for h in memory.holders] == [SERVER_A]
    assert "cannot be removed" in check.suggestions[0].text
    assert check.suggestions[0].command is None


def test_no_reserved_is_enough_when_the_total_itself_is_too_small(fake, client):
    check = check_change(client, RP, asked(fake, VCPU=record(10)))
    (vcpu,) = check.refused
    assert vcpu.safe_reserved is None
    assert vcpu.safe_total == 20
    assert check.suggestions[0].command.endswith("--resource VCPU=20:0")


def test_only_the_largest_holders_are_described(fake, client):
    check = check_change(client, RP, asked(fake, VCPU=record(16)), holders_shown=1)
    (vcpu,) = check.refused
    assert vcpu.consumers == 3
    assert [h.consumer for h in vcpu.holders] == [SERVER_A]
    looked_up = [p for _, p in fake.requests if p.startswith("/allocations/")]
    assert looked_up == [f"/allocations/{SERVER_A}"]


def test_explains_tallys_409_from_its_usage_member(fake, client):
    error = PlacementError(
        "PUT",
        f"/resource_providers/{RP}/inventories",
        409,
        detail=f"Inventory for 'VCPU' on resource provider '{RP}' in use: 20 used, ...",
        code="placement.inventory.inuse",
        extra={"usage": [{"resource_class": "VCPU", "used": 20, "capacity": 16}]},
    )
    check = explain_refusal(client, RP, asked(fake, VCPU=record(32, reserved=16)), error)

    assert check.server_detail.startswith("Inventory for 'VCPU'")
    (vcpu,) = check.refused
    assert (vcpu.used, vcpu.gap, vcpu.safe_reserved, vcpu.consumers) == (20, 4, 12, 3)


def test_explains_upstreams_bare_409_by_reading_the_provider(fake, client):
    detail = (
        "There was a conflict when trying to complete your request.\n\n "
        f"Inventory for 'MEMORY_MB, VCPU' on resource provider '{RP}' in use.  "
    )
    error = PlacementError("PUT", "/x", 409, detail=detail)
    assert error.inventory_in_use
    check = explain_refusal(client, RP, {"DISK_GB": record(100)}, error)

    assert [c.resource_class for c in check.refused] == ["MEMORY_MB", "VCPU"]
    assert all(c.removed for c in check.refused)
    assert check.refused[1].holders[0].consumer == SERVER_A


def test_a_consumer_gone_since_the_read_is_still_listed(fake, client):
    real = fake.handle

    def vanishing(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/allocations/{SERVER_B}":
            return httpx.Response(404, json={"errors": [{"status": 404, "detail": "gone"}]})
        return real(request)

    client = PlacementClient("http://placement", transport=httpx.MockTransport(vanishing))
    (vcpu,) = check_change(client, RP, asked(fake, VCPU=record(16))).refused
    gone = next(h for h in vcpu.holders if h.consumer == SERVER_B)
    assert (gone.amount, gone.project_id, gone.consumer_type) == (6, None, None)


def test_the_report_is_plain_data(fake, client):
    check = check_change(client, RP, asked(fake, VCPU=record(32, reserved=16)))
    data = json.loads(json.dumps(check.as_dict()))
    assert data["ok"] is False
    vcpu = next(c for c in data["classes"] if c["resource_class"] == "VCPU")
    assert (vcpu["gap"], vcpu["removed"], vcpu["safe_reserved"]) == (4, False, 12)


@pytest.mark.parametrize("ratio", [1.0, 1.5, 2.0, 16.0, 0.5, 0.9])
@pytest.mark.parametrize("total", [1, 7, 32, 100])
def test_largest_safe_reserved_and_smallest_total_agree_with_brute_force(total, ratio):
    for used in range(1, int(total * ratio) + 3):
        fits = [r for r in range(total + 1) if capacity(record(total, r, ratio)) >= used]
        assert largest_safe_reserved(total, ratio, used) == (max(fits) if fits else None)
        for reserved in (0, 3):
            smallest = smallest_safe_total(reserved, ratio, used)
            assert capacity(record(smallest, reserved, ratio)) >= used
            assert capacity(record(smallest - 1, reserved, ratio)) < used
