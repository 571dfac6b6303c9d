"""/resource_providers/{uuid}/inventories[/{resource_class}]: reads, writes,
validation, generation conflicts and the microversion switches (1.5, 1.15, 1.26).

Providers are made directly in the database (`make_provider`), so these tests
depend on no other endpoint.
"""

from __future__ import annotations

import uuid as uuidlib

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction
from tests.builders import make_provider
from tests.conftest import PlacementClient

MAX_INT = 2147483647
JSON = {"content-type": "application/json"}


@pytest.fixture
def rp(engine: sa.Engine) -> str:
    return make_provider(engine)


def put_all(client: PlacementClient, uuid: str, generation: int, inventories: dict, **kw):
    body = {"resource_provider_generation": generation, "inventories": inventories}
    return client.simulate_put(f"/resource_providers/{uuid}/inventories", json=body, **kw)


def post(client: PlacementClient, uuid: str, **body):
    return client.simulate_post(f"/resource_providers/{uuid}/inventories", json=body)


def error(result) -> dict:
    return result.json["errors"][0]


# ---------------------------------------------------------------- reads


def test_empty_inventory_and_missing_provider(api, rp):
    client = api()
    result = client.simulate_get(f"/resource_providers/{rp}/inventories")
    assert result.status_code == 200
    assert result.json == {"resource_provider_generation": 0, "inventories": {}}
    missing = str(uuidlib.uuid4())
    result = client.simulate_get(f"/resource_providers/{missing}/inventories")
    assert result.status_code == 404
    assert f"No resource provider with uuid {missing} found" in error(result)["detail"]
    result = client.simulate_get(f"/resource_providers/{missing}/inventories/VCPU")
    assert result.status_code == 404


def test_post_fills_defaults_and_returns_location(api, rp):
    result = post(api(), rp, resource_class="DISK_GB", total=2048)
    assert result.status_code == 201
    assert result.headers["location"].endswith(f"/resource_providers/{rp}/inventories/DISK_GB")
    assert result.headers["location"].startswith("http")
    assert result.json == {
        "resource_provider_generation": 1,
        "total": 2048,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": MAX_INT,
        "step_size": 1,
        "allocation_ratio": 1.0,
    }
    one = api().simulate_get(f"/resource_providers/{rp}/inventories/DISK_GB")
    assert one.json == result.json


def test_get_one_class_not_on_provider_is_404(api, rp):
    post(api(), rp, resource_class="DISK_GB", total=10)
    for rc in ("VCPU", "HOUSE"):
        result = api().simulate_get(f"/resource_providers/{rp}/inventories/{rc}")
        assert result.status_code == 404
        assert f"No inventory of class {rc} for {rp}" in error(result)["detail"]


@pytest.mark.parametrize("version", ["1.14", "1.15"])
def test_last_modified_from_1_15(api, rp, version):
    client = api(version)
    empty = client.simulate_get(f"/resource_providers/{rp}/inventories")
    assert "last-modified" not in empty.headers  # nothing was ever modified
    assert empty.headers.get("cache-control") == ("no-cache" if version == "1.15" else None)
    post(client, rp, resource_class="VCPU", total=8)
    for path in (
        f"/resource_providers/{rp}/inventories",
        f"/resource_providers/{rp}/inventories/VCPU",
    ):
        result = client.simulate_get(path)
        if version == "1.15":
            assert result.headers["cache-control"] == "no-cache"
            assert result.headers["last-modified"].endswith(" GMT")
        else:
            assert "last-modified" not in result.headers
            assert "cache-control" not in result.headers


# ---------------------------------------------------------------- writes


def test_put_all_adds_updates_and_removes(api, rp):
    client = api()
    result = put_all(client, rp, 0, {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}})
    assert result.status_code == 200
    assert result.json["resource_provider_generation"] == 1
    assert set(result.json["inventories"]) == {"VCPU", "DISK_GB"}
    assert result.json["inventories"]["VCPU"]["allocation_ratio"] == 1.0
    body = {"total": 16, "reserved": 2, "allocation_ratio": 4.0, "max_unit": 16, "step_size": 2}
    result = put_all(client, rp, 1, {"VCPU": body, "MEMORY_MB": {"total": 4096}})
    assert result.status_code == 200
    assert result.json["resource_provider_generation"] == 2
    assert set(result.json["inventories"]) == {"VCPU", "MEMORY_MB"}
    assert result.json["inventories"]["VCPU"] == {**body, "min_unit": 1}
    listed = client.simulate_get(f"/resource_providers/{rp}/inventories").json
    assert listed == result.json
    result = put_all(client, rp, 2, {})
    assert result.json == {"resource_provider_generation": 3, "inventories": {}}


def test_every_write_answers_what_a_read_then_shows(api, rp):
    # the answer is built from what was written, not read back (except on MySQL,
    # which keeps ratios in single precision: 1.23456789 comes back as 1.23457),
    # and is byte for byte a read's, last-modified and key order included
    client = api("1.15")
    path = f"/resource_providers/{rp}/inventories"

    def same_as_read(result, one: str | None = None) -> None:
        assert result.status_code in (200, 201), result.text
        read = client.simulate_get(f"{path}/{one}" if one else path)
        assert result.text == read.text
        assert result.headers["last-modified"] == read.headers["last-modified"]

    ratio = {"total": 64, "reserved": 3, "allocation_ratio": 1.23456789, "max_unit": 32}
    same_as_read(put_all(client, rp, 0, {"MEMORY_MB": {"total": 4096}, "VCPU": ratio}))
    same_as_read(post(client, rp, resource_class="DISK_GB", total=100, step_size=10), "DISK_GB")
    changed = {"VCPU": {**ratio, "allocation_ratio": 16}, "MEMORY_MB": {"total": 4096}}
    same_as_read(put_all(client, rp, 2, {**changed, "DISK_GB": {"total": 100, "step_size": 10}}))
    body = {"resource_provider_generation": 3, "total": 50, "reserved": 1}
    same_as_read(client.simulate_put(f"{path}/DISK_GB", json=body), "DISK_GB")
    assert list(client.simulate_get(path).json["inventories"]) == ["VCPU", "MEMORY_MB", "DISK_GB"]


def test_put_one_class(api, rp):
    client = api()
    post(client, rp, resource_class="VCPU", total=8)
    path = f"/resource_providers/{rp}/inventories/VCPU"
    result = client.simulate_put(
        path, json={"resource_provider_generation": 1, "total": 16, "reserved": 1}
    )
    assert result.status_code == 200
    assert result.json["resource_provider_generation"] == 2
    assert (result.json["total"], result.json["reserved"]) == (16, 1)
    result = client.simulate_put(
        f"/resource_providers/{rp}/inventories/MEMORY_MB",
        json={"resource_provider_generation": 2, "total": 16},
    )
    assert result.status_code == 400
    assert "No inventory record with resource class MEMORY_MB" in error(result)["detail"]
    result = client.simulate_put(
        f"/resource_providers/{rp}/inventories/HOUSE",
        json={"resource_provider_generation": 2, "total": 16},
    )
    assert result.status_code == 404
    assert "No such resource class HOUSE" in error(result)["detail"]


def test_post_duplicate_class_is_a_conflict(api, rp):
    client = api()
    assert post(client, rp, resource_class="VCPU", total=8).status_code == 201
    result = post(client, rp, resource_class="VCPU", total=8)
    assert result.status_code == 409
    assert "Update conflict" in error(result)["detail"]
    assert error(result)["code"] == "placement.concurrent_update"


def test_post_ignores_a_stale_generation(api, rp):
    result = post(api(), rp, resource_class="VCPU", total=8, resource_provider_generation=42)
    assert result.status_code == 201
    assert result.json["resource_provider_generation"] == 1


def test_delete_one_class(api, rp):
    client = api()
    post(client, rp, resource_class="VCPU", total=8)
    post(client, rp, resource_class="DISK_GB", total=8)
    result = client.simulate_delete(f"/resource_providers/{rp}/inventories/VCPU")
    assert result.status_code == 204
    assert not result.content
    assert "content-type" not in result.headers
    listed = client.simulate_get(f"/resource_providers/{rp}/inventories").json
    assert listed["resource_provider_generation"] == 3
    assert set(listed["inventories"]) == {"DISK_GB"}
    for rc in ("VCPU", "HOUSE"):
        again = client.simulate_delete(f"/resource_providers/{rp}/inventories/{rc}")
        assert again.status_code == 404
        assert f"No inventory of class {rc} found for delete" in error(again)["detail"]


def test_delete_all_from_1_5(api, rp):
    post(api(), rp, resource_class="VCPU", total=8)
    path = f"/resource_providers/{rp}/inventories"
    old = api("1.4").simulate_delete(path)
    assert old.status_code == 405
    assert api("1.5").simulate_delete(path).status_code == 204
    # an empty inventory may be deleted again; the generation still moves
    assert api("1.5").simulate_delete(path).status_code == 204
    listed = api().simulate_get(path).json
    assert listed == {"resource_provider_generation": 3, "inventories": {}}
    missing = api("1.5").simulate_delete(f"/resource_providers/{uuidlib.uuid4()}/inventories")
    assert missing.status_code == 404


def test_every_write_bumps_the_generation(api, rp, engine):
    client = api()
    post(client, rp, resource_class="VCPU", total=8)
    put_all(client, rp, 1, {"VCPU": {"total": 9}})
    client.simulate_put(
        f"/resource_providers/{rp}/inventories/VCPU",
        json={"resource_provider_generation": 2, "total": 10},
    )
    client.simulate_delete(f"/resource_providers/{rp}/inventories/VCPU")
    with engine.connect() as conn:
        generation = conn.execute(
            sa.select(t.resource_providers.c.generation).where(t.resource_providers.c.uuid == rp)
        ).scalar_one()
    assert generation == 4


# ---------------------------------------------------------------- generation conflicts


def test_stale_generation_is_409_concurrent_update(api, rp):
    client = api("1.23")
    put_all(client, rp, 0, {"VCPU": {"total": 8}})
    result = put_all(client, rp, 0, {"VCPU": {"total": 9}})
    assert result.status_code == 409
    assert "resource provider generation conflict" in error(result)["detail"]
    assert error(result)["code"] == "placement.concurrent_update"
    result = client.simulate_put(
        f"/resource_providers/{rp}/inventories/VCPU",
        json={"resource_provider_generation": 5, "total": 9},
    )
    assert result.status_code == 409
    assert error(result)["code"] == "placement.concurrent_update"
    # nothing changed
    listed = client.simulate_get(f"/resource_providers/{rp}/inventories").json
    assert listed["resource_provider_generation"] == 1
    assert listed["inventories"]["VCPU"]["total"] == 8


def test_generation_conflict_before_capacity_check(api, rp):
    """A stale generation is answered first (upstream's order): the 409 of a
    concurrent update, not the 400 of reserved above total."""
    result = put_all(api(), rp, 7, {"VCPU": {"total": 8, "reserved": 9}})
    assert result.status_code == 409
    assert error(result)["code"] == "placement.concurrent_update"
    assert "resource provider generation conflict" in error(result)["detail"]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("field", "value", "keyword"),
    [
        ("total", 0, "minimum"),
        ("total", -1, "minimum"),
        ("total", MAX_INT + 1, "maximum"),
        ("reserved", -1, "minimum"),
        ("reserved", MAX_INT + 1, "maximum"),
        ("min_unit", 0, "minimum"),
        ("max_unit", 0, "minimum"),
        ("step_size", 0, "minimum"),
        ("step_size", MAX_INT + 1, "maximum"),
        ("allocation_ratio", 0, "exclusiveMinimum"),
        ("allocation_ratio", -1.5, "exclusiveMinimum"),
        ("allocation_ratio", 3.40282e39, "maximum"),
        ("total", "8", "type"),
        ("total", 1.5, "type"),
        ("colour", "red", "additionalProperties"),
    ],
)
def test_bad_fields_are_400_naming_them(api, rp, field, value, keyword):
    client = api()
    record = {"total": 8, field: value}
    results = [
        post(client, rp, resource_class="VCPU", **record),
        put_all(client, rp, 0, {"VCPU": record}),
    ]
    for result in results:
        assert result.status_code == 400, result.text
        detail = error(result)["detail"]
        assert detail.startswith("JSON does not validate")
        assert f"Failed validating '{keyword}'" in detail
        if keyword not in ("additionalProperties",):
            assert f"['{field}']" in detail
    listed = client.simulate_get(f"/resource_providers/{rp}/inventories").json
    assert listed["inventories"] == {}


def test_required_fields(api, rp):
    client = api()
    result = post(client, rp, resource_class="DISK_GB")
    assert "'total' is a required property" in error(result)["detail"]
    result = post(client, rp, total=8)
    assert "'resource_class' is a required property" in error(result)["detail"]
    result = client.simulate_put(f"/resource_providers/{rp}/inventories", json={"inventories": {}})
    assert "'resource_provider_generation' is a required property" in error(result)["detail"]
    result = client.simulate_put(f"/resource_providers/{rp}/inventories/VCPU", json={"total": 8})
    assert "'resource_provider_generation' is a required property" in error(result)["detail"]
    result = put_all(client, rp, 0, {"VCPU": {"reserved": 1}})
    assert "'total' is a required property" in error(result)["detail"]


def test_malformed_and_wrong_media_type(api, rp):
    client = api()
    path = f"/resource_providers/{rp}/inventories"
    result = client.simulate_post(path, body='{"foo": }', headers=JSON)
    assert result.status_code == 400
    assert "Malformed JSON" in error(result)["detail"]
    result = client.simulate_post(path, body="total=8", headers={"content-type": "text/plain"})
    assert result.status_code == 415


def test_unknown_resource_class(api, rp):
    client = api()
    result = post(client, rp, resource_class="NO_CLASS_14", total=8)
    assert result.status_code == 400
    assert "No such resource class NO_CLASS_14" in error(result)["detail"]
    result = post(client, rp, resource_class="bad_class", total=8)
    assert result.status_code == 400
    result = put_all(client, rp, 0, {"HOUSE": {"total": 8}, "house": {"total": 1}})
    assert result.status_code == 400
    detail = error(result)["detail"]
    assert "Unknown resource class in inventory" in detail
    assert "HOUSE" in detail and "house" in detail


def test_custom_resource_class(api, rp, engine):
    with transaction(engine, write=True) as conn:
        conn.execute(
            t.resource_classes.insert().values(id=t.CUSTOM_RC_START_ID, name="CUSTOM_GOLD")
        )
    result = put_all(api(), rp, 0, {"CUSTOM_GOLD": {"total": 5}})
    assert result.status_code == 200
    assert result.json["inventories"]["CUSTOM_GOLD"]["total"] == 5


@pytest.mark.parametrize(
    ("version", "reserved", "status", "words"),
    [
        ("1.25", 8, 400, "greater than or equal to total"),
        ("1.25", 9, 400, "greater than or equal to total"),
        ("1.26", 8, 200, None),
        ("1.26", 9, 400, "greater than total"),
    ],
)
def test_reserved_equal_to_total_from_1_26(api, rp, version, reserved, status, words):
    client = api(version)
    record = {"total": 8, "reserved": reserved}
    put = put_all(client, rp, 0, {"VCPU": record})
    assert put.status_code == status
    if words:
        assert "Unable to update inventory" in error(put)["detail"]
        assert words in error(put)["detail"]
    created = post(client, rp, resource_class="DISK_GB", **record)
    assert created.status_code == (201 if status == 200 else 400)
    if words:
        assert "Unable to create inventory for resource provider" in error(created)["detail"]
        assert words in error(created)["detail"]


def test_put_one_reserved_equal_total_by_version(api, rp):
    post(api(), rp, resource_class="VCPU", total=8)
    path = f"/resource_providers/{rp}/inventories/VCPU"
    body = {"resource_provider_generation": 1, "total": 8, "reserved": 8}
    old = api("1.25").simulate_put(path, json=body)
    assert old.status_code == 400
    assert f"Unable to update inventory for resource provider {rp}" in error(old)["detail"]
    assert api("1.26").simulate_put(path, json=body).status_code == 200


def test_ratio_that_rounds_capacity_to_zero_before_1_26(api, rp):
    record = {"total": 2, "reserved": 1, "allocation_ratio": 0.5}
    assert put_all(api("1.25"), rp, 0, {"VCPU": record}).status_code == 400
    assert put_all(api("1.26"), rp, 0, {"VCPU": record}).status_code == 200


def test_min_unit_above_max_unit(api, rp):
    result = post(api(), rp, resource_class="VCPU", total=8, min_unit=4, max_unit=2)
    assert result.status_code == 400
    assert "min_unit of VCPU (4) is greater than max_unit (2)" in error(result)["detail"]
    ok = post(api(), rp, resource_class="VCPU", total=8, min_unit=2, max_unit=2)
    assert ok.status_code == 201


def test_405_for_unsupported_method(api, rp):
    result = api().simulate_patch(f"/resource_providers/{rp}/inventories", json={})
    assert result.status_code == 405
    result = api().simulate_post(f"/resource_providers/{rp}/inventories/VCPU", json={})
    assert result.status_code == 405


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_json_numbers_are_malformed(api, rp, constant):
    body = f'{{"resource_class": "VCPU", "total": 8, "allocation_ratio": {constant}}}'
    result = api().simulate_post(f"/resource_providers/{rp}/inventories", body=body, headers=JSON)
    assert result.status_code == 400
    assert "Malformed JSON" in error(result)["detail"]
