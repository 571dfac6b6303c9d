"""Usages over HTTP: per provider, per project/user (1.9), and grouped by
consumer type with consumer counts (1.38) on every backend."""

from __future__ import annotations

import uuid

import pytest

from tests.api.test_allocations import body
from tests.builders import provider_with_inventory
from tests.conftest import PlacementClient


def claim(client: PlacementClient, rp: str, resources: dict, project: str, user: str, kind=None):
    extra = {"consumer_type": kind} if kind else {}
    payload = dict(body({rp: resources}, **extra), project_id=project, user_id=user)
    version = "1.38" if kind else "1.28"
    consumer = str(uuid.uuid4())
    result = PlacementClient(client.app, version).simulate_put(
        f"/allocations/{consumer}", json=payload
    )
    assert result.status_code == 204, result.text
    return consumer


def test_provider_usages(api, engine):
    client = api("1.14")
    missing = str(uuid.uuid4())
    result = client.simulate_get(f"/resource_providers/{missing}/usages")
    assert result.status_code == 404
    assert f"No resource provider with uuid {missing} found" in result.json["errors"][0]["detail"]

    bare = provider_with_inventory(engine)
    assert client.simulate_get(f"/resource_providers/{bare}/usages").json == {
        "resource_provider_generation": 0,
        "usages": {},
    }
    rp = provider_with_inventory(engine, VCPU=8, DISK_GB=100)
    claim(client, rp, {"VCPU": 3}, "p", "u")
    claim(client, rp, {"VCPU": 2}, "p", "u")
    result = client.simulate_get(f"/resource_providers/{rp}/usages")
    assert result.json == {"resource_provider_generation": 2, "usages": {"VCPU": 5, "DISK_GB": 0}}
    assert "last-modified" not in result.headers
    fresh = api("1.15").simulate_get(f"/resource_providers/{rp}/usages")
    assert fresh.headers["cache-control"] == "no-cache"
    assert fresh.headers["last-modified"].endswith("GMT")


def test_usages_by_project_and_user(api, engine):
    rp = provider_with_inventory(engine, VCPU=16, DISK_GB=100)
    claim(api(), rp, {"VCPU": 2, "DISK_GB": 10}, "p1", "u1")
    claim(api(), rp, {"VCPU": 3}, "p1", "u2")
    claim(api(), rp, {"VCPU": 5}, "p2", "u1")
    client = api("1.9")
    assert client.simulate_get("/usages?project_id=p1").json == {
        "usages": {"VCPU": 5, "DISK_GB": 10}
    }
    assert client.simulate_get("/usages?project_id=p1&user_id=u2").json == {"usages": {"VCPU": 3}}
    assert client.simulate_get("/usages?project_id=nobody").json == {"usages": {}}
    assert "last-modified" not in client.simulate_get("/usages?project_id=p1").headers
    assert "last-modified" in api("1.15").simulate_get("/usages?project_id=p1").headers


@pytest.mark.parametrize(
    ("version", "query", "status", "detail"),
    [
        ("1.8", "?project_id=p", 404, None),
        ("1.9", "", 400, "'project_id' is a required property"),
        ("1.9", "?project_id=", 400, "Failed validating 'minLength'"),
        ("1.9", "?project_id=p&dummy=1", 400, "Additional properties are not allowed"),
        ("1.37", "?project_id=p&consumer_type=INSTANCE", 400, "Additional properties"),
        ("1.38", "?project_id=p&consumer_type=vm", 400, "does not match"),
    ],
)
def test_usages_query_validation(make_client, version, query, status, detail):
    result = make_client(version).simulate_get(f"/usages{query}")
    assert result.status_code == status
    if detail:
        assert detail in result.json["errors"][0]["detail"]


def test_usages_by_consumer_type(api, engine):
    rp = provider_with_inventory(engine, VCPU=32, DISK_GB=1000)
    client = api()
    claim(client, rp, {"VCPU": 2, "DISK_GB": 10}, "p", "u1", "INSTANCE")
    claim(client, rp, {"VCPU": 4}, "p", "u2", "INSTANCE")
    claim(client, rp, {"DISK_GB": 100}, "p", "u1", "MIGRATION")
    claim(client, rp, {"VCPU": 1, "DISK_GB": 1}, "p", "u1")  # no type
    claim(client, rp, {"VCPU": 8}, "other", "u1", "INSTANCE")

    def get(query: str) -> dict:
        result = client.simulate_get(f"/usages?project_id=p{query}")
        assert result.status_code == 200, result.text
        return result.json["usages"]

    assert get("") == {
        "INSTANCE": {"VCPU": 6, "DISK_GB": 10, "consumer_count": 2},
        "MIGRATION": {"DISK_GB": 100, "consumer_count": 1},
        "unknown": {"VCPU": 1, "DISK_GB": 1, "consumer_count": 1},
    }
    assert get("&user_id=u1") == {
        "INSTANCE": {"VCPU": 2, "DISK_GB": 10, "consumer_count": 1},
        "MIGRATION": {"DISK_GB": 100, "consumer_count": 1},
        "unknown": {"VCPU": 1, "DISK_GB": 1, "consumer_count": 1},
    }
    assert get("&consumer_type=all") == {"all": {"VCPU": 7, "DISK_GB": 111, "consumer_count": 4}}
    assert get("&consumer_type=unknown") == {
        "unknown": {"VCPU": 1, "DISK_GB": 1, "consumer_count": 1}
    }
    assert get("&consumer_type=MIGRATION") == {"MIGRATION": {"DISK_GB": 100, "consumer_count": 1}}
    assert get("&consumer_type=ALL") == {}
    assert get("&consumer_type=NEVER_SEEN") == {}
    # Before 1.38 the same data reads as plain totals.
    assert api("1.37").simulate_get("/usages?project_id=p").json == {
        "usages": {"VCPU": 7, "DISK_GB": 111}
    }
