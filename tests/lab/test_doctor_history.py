"""The doctor reads the claim history: an orphan or a stale migration hold says when it
was written and by which request, down to the compute API request that made the claim
(the lab compute sends its request id to Placement as `X-OpenStack-Request-ID`, as Nova
does); `tally explain` says the same of each holder. Against a Placement without the
history (upstream), it says so once and goes on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from click.testing import CliRunner

from tally.cli.context import Context
from tally.cli.main import cli

ADMIN = {"x-auth-token": "admin", "openstack-api-version": "compute 2.96"}
FOUND = 3


@pytest.fixture
def lab_engine(engine):
    """Every backend configured (SQLite; PostgreSQL and MySQL when set up)."""
    return engine


def compute(lab, method: str, path: str, body: Any = None) -> tuple[Any, str]:
    """A compute API call as admin: (its JSON answer, the compute request id)."""
    found = lab.http.request(method, f"/compute/v2.1{path}", json=body, headers=ADMIN)
    assert found.status_code < 300, found.text
    return (found.json() if found.content else None), found.headers["x-openstack-request-id"]


def boot(lab, name: str, host: str) -> tuple[str, str]:
    """A server booted on `host`: (its id, the request id of the POST /servers)."""
    body = {"server": {"name": name, "flavorRef": "m1.small", "availability_zone": f"nova:{host}"}}
    created, request = compute(lab, "POST", "/servers", body)
    return created["server"]["id"], request


def doctor(lab, *args: str, placement: Any = None) -> tuple[int, Any, str]:
    """`tally ARGS -f json` in-process: (exit code, parsed stdout, stderr)."""
    context = Context.for_client(placement or lab.placement)
    context.compute = lab.compute
    result = CliRunner().invoke(cli, [*args, "-f", "json"], obj=context)
    return result.exit_code, json.loads(result.stdout), result.stderr


def by_consumer(rows: Iterable[dict], key: str = "consumer") -> dict[str, dict]:
    return {row[key]: row for row in rows}


def test_an_orphan_names_the_request_that_wrote_it(cloud):
    web, booted = boot(cloud, "web", "cmp-1")
    db, _ = boot(cloud, "db", "cmp-1")
    _, broke = compute(
        cloud, "POST", "/os-lab/faults", {"fault": {"kind": "delete-while-down", "server": web}}
    )
    code, rows, _ = doctor(cloud, "audit")
    assert code == FOUND
    orphan = by_consumer(rows)[web]
    assert orphan["kind"] == "orphan"
    history = orphan["history"]
    assert history["global_request_id"] == booted  # the compute's POST /servers
    assert history["request_id"].startswith("req-") and history["request_id"] != booted
    assert (history["user_id"], history["project_id"]) == ("nova", "service")
    assert history["written_at"].endswith("Z")
    assert history["last_touched_at"] == history["written_at"]  # nothing since
    assert broke != booted

    rp = cloud.host("cmp-1")["provider_uuid"]
    code, found, _ = doctor(cloud, "explain", rp, "--resource", "VCPU=16:16")
    assert code == 1
    holders = by_consumer(found["holders"])
    assert set(holders) == {web, db}
    assert holders[web]["kind"] == "orphan"
    assert holders[web]["history"]["global_request_id"] == booted
    assert holders[db]["history"]["global_request_id"] != booted  # its own boot's


def test_a_stale_migration_hold_names_its_request_and_its_last_touch(cloud):
    web, booted = boot(cloud, "web", "cmp-1")
    body = {"fault": {"kind": "migration-error", "server": web, "target": "cmp-2"}}
    report, broke = compute(cloud, "POST", "/os-lab/faults", body)
    migration = report["fault"]["migration"]
    code, rows, _ = doctor(cloud, "audit")
    assert code == FOUND
    stale = by_consumer(rows)[migration]
    assert stale["kind"] == "stale-migration"
    # the move's claim: the migration took the server's source hold in that request
    assert stale["history"]["global_request_id"] == broke
    misplaced = by_consumer(rows)[web]
    assert misplaced["kind"] == "misplaced"
    assert misplaced["history"]["global_request_id"] == broke  # its claim on the target
    written = stale["history"]["written_at"]
    assert written and stale["history"]["last_touched_at"] >= written


def test_without_a_history_the_doctor_says_so_once_and_goes_on(cloud, make_placement):
    web, _ = boot(cloud, "web", "cmp-1")
    boot(cloud, "db", "cmp-1")
    compute(
        cloud, "POST", "/os-lab/faults", {"fault": {"kind": "delete-while-down", "server": web}}
    )
    upstream = make_placement(lambda path: path.startswith("/placement/tally/"))
    code, rows, stderr = doctor(cloud, "audit", placement=upstream)
    assert code == FOUND
    assert by_consumer(rows)[web]["kind"] == "orphan"
    assert by_consumer(rows)[web]["history"] is None
    assert stderr.count("claim history: this Placement has no /tally/v1/history") == 1

    rp = cloud.host("cmp-1")["provider_uuid"]
    code, found, stderr = doctor(
        cloud, "explain", rp, "--resource", "VCPU=16:16", placement=upstream
    )
    assert code == 1 and all(h["history"] is None for h in found["holders"])
    assert stderr.count("claim history") == 1

    forbidden = make_placement(lambda path: False, token="nova")  # a service user's token
    code, rows, stderr = doctor(cloud, "audit", placement=forbidden)
    assert code == FOUND and by_consumer(rows)[web]["history"] is None
    assert "claim history: these credentials may not read it (HTTP 403" in stderr


@pytest.fixture
def make_placement(cloud) -> Callable[..., Any]:
    """`make_placement(hidden, token="admin")`: a client of the lab's Placement that
    answers 404 (as upstream Placement does for a path it does not know) wherever
    `hidden(path)` says so."""
    import httpx

    from tally.clients.placement import PlacementClient

    def make(hidden: Callable[[str], bool], token: str = "admin") -> PlacementClient:
        def handler(request: httpx.Request) -> httpx.Response:
            if hidden(request.url.path):
                body = {"errors": [{"status": 404, "title": "Not Found", "detail": "no"}]}
                return httpx.Response(404, json=body)
            request.headers["x-roles"] = "service" if token != "admin" else "admin"
            return cloud.transport.handle_request(request)

        transport = httpx.MockTransport(handler)
        return PlacementClient("http://lab.test/placement", token=token, transport=transport)

    return make


def test_the_compute_passes_on_its_callers_global_request_id(cloud):
    theirs = f"req-{uuid.uuid4()}"
    body = {"server": {"name": "web", "flavorRef": "m1.small"}}
    headers = {**ADMIN, "x-openstack-request-id": theirs}
    found = cloud.http.post("/compute/v2.1/servers", json=body, headers=headers)
    assert found.status_code == 202, found.text
    assert found.headers["x-openstack-request-id"] != theirs  # its own id, as Nova's
    server = found.json()["server"]["id"]
    rows = cloud.placement.history({"consumer": server})["history"]
    assert rows and {r["global_request_id"] for r in rows} == {theirs}
