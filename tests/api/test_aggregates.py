"""/resource_providers/{uuid}/aggregates: the list body before 1.19, the
generation-guarded body from 1.19, validation, and shared aggregates.

Providers are written directly in the database, so these tests depend on no
other endpoint.
"""

from __future__ import annotations

import concurrent.futures

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction
from tests.builders import make_provider
from tests.conftest import PlacementClient

AGG_1 = "f918801a-5e54-4bee-9095-09a9d0c786b8"
AGG_2 = "a893eb5c-e2a0-4251-ab26-f71d3b0cfc0b"
AGG_3 = "0c7e1d8e-7a3b-4b8e-9a51-3f6cbd0e2a11"
MISSING = "6984bb2d-830d-4c8d-ac64-c5a8103664be"


@pytest.fixture
def rp(engine: sa.Engine) -> str:
    return make_provider(engine)


def path(uuid: str) -> str:
    return f"/resource_providers/{uuid}/aggregates"


def put(client: PlacementClient, uuid: str, generation: int, *aggs: str):
    body = {"aggregates": list(aggs), "resource_provider_generation": generation}
    return client.simulate_put(path(uuid), json=body)


def generation(client: PlacementClient, uuid: str) -> int:
    return client.simulate_get(path(uuid)).json["resource_provider_generation"]


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_masked_at_1_0(api, rp, method):
    body = {"json": []} if method == "PUT" else {}
    result = api("1.0").simulate_request(method, path(rp), **body)
    assert result.status_code == 404


@pytest.mark.parametrize("version", ["1.1", "latest"])
@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_unknown_provider_is_404_whatever_the_body(api, method, version):
    body = {"json": []} if method == "PUT" else {}
    result = api(version).simulate_request(method, path(MISSING), **body)
    assert result.status_code == 404
    assert result.json["errors"][0]["title"] == "Not Found"


def test_list_body_before_1_19_leaves_the_generation(api, rp):
    client = api("1.18")
    assert client.simulate_get(path(rp)).json == {"aggregates": []}
    result = client.simulate_put(path(rp), json=[AGG_1, AGG_2])
    assert result.status_code == 200
    assert result.json == {"aggregates": [AGG_1, AGG_2]}
    assert sorted(client.simulate_get(path(rp)).json["aggregates"]) == sorted([AGG_1, AGG_2])
    assert generation(api(), rp) == 0


def test_generation_body_from_1_19(api, rp):
    client = api("1.19")
    result = put(client, rp, 0, AGG_1, AGG_2)
    assert result.status_code == 200
    assert result.json == {"aggregates": [AGG_1, AGG_2], "resource_provider_generation": 1}
    shown = client.simulate_get(path(rp)).json
    assert sorted(shown["aggregates"]) == sorted([AGG_1, AGG_2])
    assert shown["resource_provider_generation"] == 1
    assert put(client, rp, 0).status_code == 409
    stale = put(api("1.23"), rp, 0)
    assert stale.status_code == 409
    assert stale.json["errors"][0]["code"] == "placement.concurrent_update"
    assert "generation already changed" in stale.json["errors"][0]["detail"]
    # an unchanged set still moves the generation, as upstream
    assert put(client, rp, 1, AGG_2, AGG_1).json["resource_provider_generation"] == 2
    cleared = put(client, rp, 2)
    assert cleared.json == {"aggregates": [], "resource_provider_generation": 3}
    assert client.simulate_get(path(rp)).json["aggregates"] == []


@pytest.mark.parametrize(
    ("version", "body", "words"),
    [
        ("latest", [AGG_1, AGG_2], "JSON does not validate"),
        ("1.18", {"aggregates": [AGG_1], "resource_provider_generation": 0}, "not of type"),
        ("latest", {"aggregates": [AGG_1]}, "'resource_provider_generation' is a required"),
        ("latest", {"aggregates": ["harry"], "resource_provider_generation": 0}, "is not a 'uuid'"),
        ("latest", {"aggregates": [AGG_1, AGG_1], "resource_provider_generation": 0}, "non-unique"),
        ("1.1", [AGG_1, AGG_1], "has non-unique elements"),
        ("1.1", ["sally"], "is not a 'uuid'"),
    ],
)
def test_put_validation(api, rp, version, body, words):
    result = api(version).simulate_put(path(rp), json=body)
    assert result.status_code == 400
    assert words in result.json["errors"][0]["detail"]
    assert api().simulate_get(path(rp)).json == {
        "aggregates": [],
        "resource_provider_generation": 0,
    }


def test_malformed_json(api, rp):
    result = api().simulate_put(
        path(rp), body='{"bad", "not json"}', headers={"content-type": "application/json"}
    )
    assert result.status_code == 400
    assert "Malformed JSON" in result.text


def test_providers_share_aggregates(api, engine, rp):
    client = api()
    other = make_provider(engine)
    put(client, rp, 0, AGG_1, AGG_2)
    put(client, other, 0, AGG_2, AGG_3)
    put(client, rp, 1, AGG_1)
    assert client.simulate_get(path(rp)).json["aggregates"] == [AGG_1]
    assert sorted(client.simulate_get(path(other)).json["aggregates"]) == sorted([AGG_2, AGG_3])
    with transaction(engine) as conn:
        stored = conn.execute(sa.select(t.placement_aggregates.c.uuid)).scalars().all()
    assert sorted(stored) == sorted([AGG_1, AGG_2, AGG_3])  # one row per aggregate


def test_cache_headers_from_1_15(api, rp):
    for version, present in (("1.14", False), ("1.15", True)):
        client = api(version)
        for result in (client.simulate_put(path(rp), json=[AGG_1]), client.simulate_get(path(rp))):
            assert ("last-modified" in result.headers) is present
            assert (result.headers.get("cache-control") == "no-cache") is present


def test_concurrent_writers_of_new_aggregates(api, engine):
    """Providers racing to create the same aggregates all succeed, and each
    aggregate gets one row."""
    client = api()
    providers = [make_provider(engine) for _ in range(6)]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda uuid: put(client, uuid, 0, AGG_1, AGG_2, AGG_3), providers))
    assert [r.status_code for r in results] == [200] * 6
    with transaction(engine) as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(t.placement_aggregates)).scalar()
            == 3
        )
        links = conn.execute(sa.select(sa.func.count()).select_from(t.resource_provider_aggregates))
        assert links.scalar() == 18
