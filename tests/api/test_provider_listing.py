"""GET /resource_providers writes its body straight from rows
(`handlers.providers.render_listing`): the bytes must be those of the
dict-per-provider shaping the other provider answers use
(`handlers.providers.serialize`, dumped by orjson), at every microversion,
under a path prefix, for names JSON must escape, and filtered.

    root-a                  (name with a quote and a backslash)
      +- child-a1           (name with a tab, a newline, a control character)
      |    +- grandchild    (non-ASCII name)
      +- child-a2
    root-b
"""

from __future__ import annotations

import types
import uuid as uuidlib

import orjson
import pytest

from tally.placement.handlers import providers as handler
from tally.placement.ledger import providers as ledger
from tally.placement.microversion import VERSIONS, as_tuple

NAMES = {
    "root-a": 'root "a" \\ one',
    "child-a1": "child\ta1\nsecond line \x01",
    "grandchild": "grändchild ☃ 子",
    "child-a2": "child-a2",
    "root-b": "root-b",
}


@pytest.fixture
def tree(api):
    """The providers of the module docstring: {label: uuid}."""
    parents = {"child-a1": "root-a", "grandchild": "child-a1", "child-a2": "root-a"}
    made: dict[str, str] = {}
    client = api("1.14")
    for label, name in NAMES.items():
        body = {"name": name, "uuid": str(uuidlib.uuid4())}
        if label in parents:
            body["parent_provider_uuid"] = made[parents[label]]
        result = client.simulate_post("/resource_providers", json=body)
        assert result.status_code == 201, result.text
        made[label] = body["uuid"]
    return made


def expected(engine, version: str, root_path: str = "", **filters) -> bytes:
    """The body as the dict-per-provider shaping writes it."""
    req = types.SimpleNamespace(
        root_path=root_path, context=types.SimpleNamespace(version=as_tuple(version))
    )
    found = ledger.list_providers(engine, ledger.ProviderFilter(**filters))
    return orjson.dumps({"resource_providers": [handler.serialize(req, p) for p in found]})


@pytest.mark.parametrize("version", VERSIONS)
def test_listing_bytes_match_the_provider_shaping(api, engine, tree, version):
    client = api(version)
    result = client.simulate_get("/resource_providers")
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/json"
    assert result.content == expected(engine, version)
    assert {p["name"] for p in result.json["resource_providers"]} == set(NAMES.values())
    # only names with nothing to escape
    plain = client.simulate_get("/resource_providers?name=child-a2")
    assert plain.content == expected(engine, version, name="child-a2")


@pytest.mark.parametrize("version", ["1.0", "1.14", "1.39"])
def test_listing_under_a_path_prefix(api, engine, tree, version):
    prefix = '/place"ment%s'
    result = api(version).simulate_get("/resource_providers", root_path=prefix)
    assert result.status_code == 200
    assert result.content == expected(engine, version, root_path=prefix)
    self_link = result.json["resource_providers"][0]["links"][0]["href"]
    assert self_link.startswith(prefix + "/resource_providers/")


def test_filtered_listing_keeps_parents_outside_it(api, engine, tree):
    result = api().simulate_get(f"/resource_providers?uuid={tree['grandchild']}")
    assert result.content == expected(engine, "1.39", uuid=tree["grandchild"])
    (shown,) = result.json["resource_providers"]
    assert shown["parent_provider_uuid"] == tree["child-a1"]
    assert shown["root_provider_uuid"] == tree["root-a"]


def test_a_changed_provider_is_written_anew_between_listings(api, engine, tree):
    """Parts are kept per row: a rename, a new parent or a new generation shows
    in the very next listing, at every link shape seen before."""
    for version in ("1.0", "1.14", "1.39"):  # parts kept for three shapes
        assert api(version).simulate_get("/resource_providers").content == expected(engine, version)
    client = api("1.39")
    moved = client.simulate_put(
        f"/resource_providers/{tree['root-b']}",
        json={"name": 'renamed "b"', "parent_provider_uuid": tree["root-a"]},
    )
    assert moved.status_code == 200, moved.text
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    put = client.simulate_put(f"/resource_providers/{tree['child-a2']}/inventories", json=inventory)
    assert put.status_code == 200, put.text
    for version in ("1.0", "1.14", "1.39"):
        assert api(version).simulate_get("/resource_providers").content == expected(engine, version)
    shown = {
        p["uuid"]: p for p in client.simulate_get("/resource_providers").json["resource_providers"]
    }
    assert shown[tree["root-b"]]["name"] == 'renamed "b"'
    assert shown[tree["root-b"]]["parent_provider_uuid"] == tree["root-a"]
    assert shown[tree["child-a2"]]["generation"] == 1


def test_empty_listing(api, engine):
    result = api().simulate_get("/resource_providers")
    assert result.content == b'{"resource_providers":[]}' == expected(engine, "1.39")


def test_last_modified_is_the_newest_provider(api, tree):
    client = api()
    renamed = client.simulate_put(
        f"/resource_providers/{tree['child-a2']}", json={"name": "renamed"}
    )
    assert renamed.status_code == 200
    listed = client.simulate_get("/resource_providers")
    assert listed.headers["last-modified"] == renamed.headers["last-modified"]
