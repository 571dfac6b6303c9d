"""/traits, /traits/{name} and /resource_providers/{uuid}/traits: creation of
custom traits, list filters, deletion rules, provider trait sets with their
generation, last-modified from 1.15.

Providers are written directly in the database, so these tests depend on no
other endpoint.
"""

from __future__ import annotations

import concurrent.futures

import os_traits
import pytest
import sqlalchemy as sa

from tests.builders import make_provider
from tests.conftest import PlacementClient

INVALID = "The trait is invalid. A valid trait must be no longer than 255 characters"
STALE = "Resource provider's generation already changed. Please update the generation"


@pytest.fixture
def rp(engine: sa.Engine) -> str:
    return make_provider(engine)


def set_traits(client: PlacementClient, uuid: str, generation: int, *traits: str):
    body = {"traits": list(traits), "resource_provider_generation": generation}
    return client.simulate_put(f"/resource_providers/{uuid}/traits", json=body)


def names(client: PlacementClient, query: str = "") -> list[str]:
    result = client.simulate_get("/traits", query_string=query)
    assert result.status_code == 200, result.text
    return result.json["traits"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/traits"),
        ("GET", "/traits/CUSTOM_A"),
        ("PUT", "/traits/CUSTOM_A"),
        ("DELETE", "/traits/CUSTOM_A"),
        ("GET", "/resource_providers/{rp}/traits"),
        ("PUT", "/resource_providers/{rp}/traits"),
        ("DELETE", "/resource_providers/{rp}/traits"),
    ],
)
def test_masked_before_1_6(api, rp, method, path):
    result = api("1.5").simulate_request(method, path.format(rp=rp))
    assert result.status_code == 404


def test_create_confirm_show_delete_a_custom_trait(api):
    client = api("1.6")
    created = client.simulate_put("/traits/CUSTOM_TRAIT_1")
    again = client.simulate_put("/traits/CUSTOM_TRAIT_1")
    assert (created.status_code, again.status_code) == (201, 204)
    for result in (created, again):
        assert result.headers["location"].endswith("/traits/CUSTOM_TRAIT_1")
        assert "content-type" not in result.headers
        assert "last-modified" not in result.headers
    shown = client.simulate_get("/traits/CUSTOM_TRAIT_1")
    assert shown.status_code == 204 and "content-type" not in shown.headers
    assert client.simulate_get("/traits/CUSTOM_NOPE").status_code == 404
    assert client.simulate_delete("/traits/CUSTOM_TRAIT_1").status_code == 204
    assert client.simulate_get("/traits/CUSTOM_TRAIT_1").status_code == 404
    assert client.simulate_delete("/traits/CUSTOM_TRAIT_1").status_code == 404


@pytest.mark.parametrize(
    "name", ["TRAIT_X", "CUSTOM_ABC:1", "CUSTOM_lower", "HW_CPU_X86_SSE", "CUSTOM_" + "A" * 249]
)
def test_only_custom_traits_can_be_created(api, name):
    result = api().simulate_put(f"/traits/{name}")
    assert result.status_code == 400
    assert INVALID in result.json["errors"][0]["detail"]


def test_standard_trait_cannot_be_deleted(api):
    result = api().simulate_delete("/traits/HW_CPU_X86_SSE")
    assert result.status_code == 400
    assert "Cannot delete standard trait HW_CPU_X86_SSE" in result.text


def test_list_has_standard_and_custom_traits(api):
    client = api()
    client.simulate_put("/traits/CUSTOM_TRAIT_1")
    listed = names(client)
    assert set(listed) == set(os_traits.get_traits()) | {"CUSTOM_TRAIT_1"}
    assert listed == sorted(listed)


def test_list_filters(api, rp):
    client = api()
    for name in ("CUSTOM_TRAIT_1", "CUSTOM_TRAIT_2", "CUSTOM_ANOTHER", "CUSTOM_A_B", "CUSTOM_AXB"):
        client.simulate_put(f"/traits/{name}")
    assert names(client, "name=in:CUSTOM_TRAIT_1,CUSTOM_TRAIT_2,CUSTOM_NONE") == [
        "CUSTOM_TRAIT_1",
        "CUSTOM_TRAIT_2",
    ]
    assert names(client, "name=startswith:CUSTOM_TRAIT") == ["CUSTOM_TRAIT_1", "CUSTOM_TRAIT_2"]
    # '_' in a prefix is a character, not a LIKE wildcard
    assert names(client, "name=startswith:CUSTOM_A_") == ["CUSTOM_A_B"]
    assert set_traits(client, rp, 0, "CUSTOM_TRAIT_1", "HW_CPU_X86_SSE").status_code == 200
    assert names(client, "associated=true") == ["CUSTOM_TRAIT_1", "HW_CPU_X86_SSE"]
    assert names(client, "associated=TRUE&name=startswith:CUSTOM_") == ["CUSTOM_TRAIT_1"]
    unassociated = names(client, "associated=false&name=startswith:CUSTOM_")
    assert unassociated == ["CUSTOM_ANOTHER", "CUSTOM_AXB", "CUSTOM_A_B", "CUSTOM_TRAIT_2"]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("name=in_abc", 'Got: "in_abc"'),
        ("name=contains:X", "Badly formatted name parameter"),
        ("associated=xyz", 'The query parameter "associated" only accepts "true" or "false"'),
        ("invalid=abc", "Invalid query string parameters: Additional properties are not allowed"),
    ],
)
def test_list_rejects_bad_queries(api, query, words):
    result = api().simulate_get("/traits", query_string=query)
    assert result.status_code == 400
    assert words in result.json["errors"][0]["detail"]


def test_provider_traits_replace_and_bump_generation(api, rp):
    client = api()
    path = f"/resource_providers/{rp}/traits"
    assert client.simulate_get(path).json == {"traits": [], "resource_provider_generation": 0}
    client.simulate_put("/traits/CUSTOM_TRAIT_1")
    result = set_traits(client, rp, 0, "CUSTOM_TRAIT_1", "HW_CPU_X86_SSE")
    assert result.status_code == 200
    expected = {"traits": ["CUSTOM_TRAIT_1", "HW_CPU_X86_SSE"], "resource_provider_generation": 1}
    assert result.json == expected
    assert client.simulate_get(path).json == expected
    # the same set again changes nothing, so the generation stays
    assert set_traits(client, rp, 1, "HW_CPU_X86_SSE", "CUSTOM_TRAIT_1").json == expected
    swapped = set_traits(client, rp, 1, "HW_CPU_X86_AVX")
    assert swapped.json == {"traits": ["HW_CPU_X86_AVX"], "resource_provider_generation": 2}


def test_provider_traits_refusals(api, rp):
    client = api()
    stale = set_traits(client, rp, 5, "HW_CPU_X86_SSE")
    assert stale.status_code == 409
    assert STALE in stale.text
    assert stale.json["errors"][0]["code"] == "placement.concurrent_update"
    unknown = set_traits(client, rp, 0, "CUSTOM_NOPE_1", "CUSTOM_NOPE_2", "HW_CPU_X86_SSE")
    assert unknown.status_code == 400
    assert "No such trait" in unknown.text and "CUSTOM_NOPE_1, CUSTOM_NOPE_2" in unknown.text
    path = f"/resource_providers/{rp}/traits"
    for body, words in [
        ({"traits": ["HW_CPU_X86_SSE"]}, "'resource_provider_generation' is a required property"),
        ({"traits": [], "resource_provider_generation": "x"}, "'x' is not of type 'integer'"),
        ({"traits": "x", "resource_provider_generation": 0}, "'x' is not of type 'array'"),
        ({"traits": [], "resource_provider_generation": 0, "more": 1}, "Additional properties"),
    ]:
        result = client.simulate_put(path, json=body)
        assert result.status_code == 400 and words in result.text
    assert client.simulate_get(path).json["resource_provider_generation"] == 0


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_provider_traits_of_unknown_provider_is_404(api, method):
    body = {"traits": [], "resource_provider_generation": 0} if method == "PUT" else None
    result = api().simulate_request(method, "/resource_providers/non_existed/traits", json=body)
    assert result.status_code == 404
    assert "No resource provider with uuid non_existed found" in result.text


def test_delete_provider_traits(api, rp):
    client = api()
    path = f"/resource_providers/{rp}/traits"
    assert client.simulate_delete(path).status_code == 204  # nothing to clear: no bump
    assert client.simulate_get(path).json["resource_provider_generation"] == 0
    set_traits(client, rp, 0, "HW_CPU_X86_SSE")
    cleared = client.simulate_delete(path)
    assert cleared.status_code == 204 and "content-type" not in cleared.headers
    assert client.simulate_get(path).json == {"traits": [], "resource_provider_generation": 2}


def test_trait_in_use_cannot_be_deleted(api, rp):
    client = api()
    client.simulate_put("/traits/CUSTOM_TRAIT_1")
    set_traits(client, rp, 0, "CUSTOM_TRAIT_1")
    in_use = client.simulate_delete("/traits/CUSTOM_TRAIT_1")
    assert in_use.status_code == 409
    assert "The trait CUSTOM_TRAIT_1 is in use by a resource provider." in in_use.text
    client.simulate_delete(f"/resource_providers/{rp}/traits")
    assert client.simulate_delete("/traits/CUSTOM_TRAIT_1").status_code == 204


def test_cache_headers_from_1_15(api, rp):
    new, old = api("1.15"), api("1.14")
    assert "last-modified" in new.simulate_put("/traits/CUSTOM_TRAIT_1").headers
    assert "last-modified" not in old.simulate_put("/traits/CUSTOM_TRAIT_1").headers
    assert set_traits(new, rp, 0, "CUSTOM_TRAIT_1").headers["cache-control"] == "no-cache"
    assert "cache-control" not in set_traits(old, rp, 1).headers
    for path in ("/traits", "/traits/CUSTOM_TRAIT_1", f"/resource_providers/{rp}/traits"):
        fresh = new.simulate_get(path)
        assert fresh.headers["cache-control"] == "no-cache"
        assert fresh.headers["last-modified"].endswith(" GMT")
        stale = old.simulate_get(path)
        assert "last-modified" not in stale.headers and "cache-control" not in stale.headers
    assert "last-modified" not in new.simulate_delete("/traits/CUSTOM_TRAIT_1").headers


def test_concurrent_trait_writers(api, engine):
    """Racing creators of one trait: one 201. Racing setters of one provider's
    traits at one generation: one wins, the rest get 409 concurrent_update."""
    client = api()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        created = list(
            pool.map(lambda _: client.simulate_put("/traits/CUSTOM_RACE").status_code, range(8))
        )
        assert sorted(created) == [201] + [204] * 7
        uuid = make_provider(engine)
        choices = ["HW_CPU_X86_SSE", "HW_CPU_X86_AVX", "HW_CPU_X86_SSE2", "CUSTOM_RACE"]
        results = list(pool.map(lambda name: set_traits(client, uuid, 0, name), choices * 2))
    statuses = sorted(r.status_code for r in results)
    assert statuses == [200] + [409] * 7
    final = client.simulate_get(f"/resource_providers/{uuid}/traits").json
    assert final["resource_provider_generation"] == 1
    assert len(final["traits"]) == 1
