"""/resource_classes[/{name}]: standard and custom classes, the PUT switch at
1.7, deletion rules, last-modified, concurrent creation; plus the parts of the
HTTP envelope these requests show (Accept on writes, error media types).

Providers, inventories and allocations are written directly in the database,
so these tests depend on no other endpoint.
"""

from __future__ import annotations

import concurrent.futures
import uuid as uuidlib

import os_resource_classes
import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.ledger.common import utcnow

JSON = {"content-type": "application/json"}


def class_ids(engine: sa.Engine) -> dict[str, int]:
    with transaction(engine) as conn:
        rows = conn.execute(sa.select(t.resource_classes.c.name, t.resource_classes.c.id))
        return {row.name: row.id for row in rows}


def use_class(engine: sa.Engine, name: str, *, allocate: bool) -> None:
    """A provider with inventory of `name`, and an allocation of it if `allocate`."""
    rc_id = class_ids(engine)[name]
    with transaction(engine, write=True) as conn:
        rp_id = conn.execute(
            t.resource_providers.insert().values(
                uuid=str(uuidlib.uuid4()), name=f"rp-{name}", generation=0, created_at=utcnow()
            )
        ).inserted_primary_key[0]
        conn.execute(
            t.inventories.insert().values(
                resource_provider_id=rp_id,
                resource_class_id=rc_id,
                total=8,
                reserved=0,
                min_unit=1,
                max_unit=8,
                step_size=1,
                allocation_ratio=1.0,
            )
        )
        if allocate:
            conn.execute(
                t.allocations.insert().values(
                    resource_provider_id=rp_id,
                    consumer_id=str(uuidlib.uuid4()),
                    resource_class_id=rc_id,
                    used=1,
                )
            )


def drop_usage(engine: sa.Engine, *tables: sa.Table) -> None:
    with transaction(engine, write=True) as conn:
        for table in tables:
            conn.execute(table.delete())


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_collection_is_masked_before_1_2(api, method):
    body = {"json": {"name": "CUSTOM_A"}} if method == "POST" else {}
    result = api("1.1").simulate_request(method, "/resource_classes", **body)
    assert result.status_code == 404
    assert result.json["errors"][0]["title"] == "Not Found"


def test_mask_comes_before_content_type_check(api):
    old = api("1.1").simulate_post(
        "/resource_classes", body="data", headers={"content-type": "text/plain"}
    )
    new = api("1.2").simulate_post(
        "/resource_classes", body="data", headers={"content-type": "text/plain"}
    )
    assert (old.status_code, new.status_code) == (404, 415)


def test_list_has_the_standard_classes_in_id_order(api):
    listed = api("1.2").simulate_get("/resource_classes").json["resource_classes"]
    assert [c["name"] for c in listed] == list(os_resource_classes.STANDARDS)
    assert listed[0]["links"] == [{"rel": "self", "href": "/resource_classes/VCPU"}]


def test_create_show_and_list_a_custom_class(api, engine):
    client = api()
    created = client.simulate_post("/resource_classes", json={"name": "CUSTOM_GOLD"})
    assert created.status_code == 201
    assert created.headers["location"].endswith("/resource_classes/CUSTOM_GOLD")
    assert "content-type" not in created.headers
    assert created.text == ""
    shown = client.simulate_get("/resource_classes/CUSTOM_GOLD")
    assert shown.json == {
        "name": "CUSTOM_GOLD",
        "links": [{"rel": "self", "href": "/resource_classes/CUSTOM_GOLD"}],
    }
    names = [c["name"] for c in client.simulate_get("/resource_classes").json["resource_classes"]]
    assert names[-1] == "CUSTOM_GOLD"
    assert len(names) == len(os_resource_classes.STANDARDS) + 1


def test_custom_ids_start_at_10000_and_increase(api, engine):
    client = api()
    for name in ("CUSTOM_A", "CUSTOM_B", "CUSTOM_C"):
        assert client.simulate_post("/resource_classes", json={"name": name}).status_code == 201
    ids = class_ids(engine)
    assert [ids["CUSTOM_A"], ids["CUSTOM_B"], ids["CUSTOM_C"]] == [10000, 10001, 10002]
    assert ids["VCPU"] == 0


def test_duplicate_post_is_409(api):
    client = api()
    client.simulate_post("/resource_classes", json={"name": "CUSTOM_GOLD"})
    again = client.simulate_post("/resource_classes", json={"name": "CUSTOM_GOLD"})
    assert again.status_code == 409
    assert "Conflicting resource class already exists: CUSTOM_GOLD" in again.text


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"name": "IRON_NFV"}, "Failed validating 'pattern'"),
        ({"name": "CUSTOM_Bad&Name"}, "Failed validating 'pattern'"),
        ({"name": "CUSTOM_" + "X" * 249}, "Failed validating 'maxLength'"),
        ({"name": "CUSTOM_OK", "extra": 1}, "Additional properties are not allowed"),
        ({}, "'name' is a required property"),
    ],
)
def test_post_validation(api, body, words):
    result = api().simulate_post("/resource_classes", json=body)
    assert result.status_code == 400
    assert "JSON does not validate" in result.text
    assert words in result.text


def test_post_malformed_json(api):
    result = api().simulate_post("/resource_classes", body='{"foo": }', headers=JSON)
    assert result.status_code == 400
    assert "Malformed JSON:" in result.json["errors"][0]["detail"]


def test_show_unknown_class_is_404(api):
    result = api().simulate_get("/resource_classes/CUSTOM_NOPE")
    assert result.status_code == 404
    assert "No such resource class CUSTOM_NOPE" in result.text


def test_rename_before_1_7(api):
    client = api("1.6")
    client.simulate_post("/resource_classes", json={"name": "CUSTOM_OLD"})
    renamed = client.simulate_put("/resource_classes/CUSTOM_OLD", json={"name": "CUSTOM_NEW"})
    assert renamed.status_code == 200
    assert renamed.json["name"] == "CUSTOM_NEW"
    assert renamed.json["links"][0]["href"] == "/resource_classes/CUSTOM_NEW"
    assert client.simulate_get("/resource_classes/CUSTOM_OLD").status_code == 404
    assert client.simulate_get("/resource_classes/CUSTOM_NEW").status_code == 200


def test_rename_refusals_before_1_7(api):
    client = api("1.6")
    for name in ("CUSTOM_A", "CUSTOM_B"):
        client.simulate_post("/resource_classes", json={"name": name})
    standard = client.simulate_put("/resource_classes/VCPU", json={"name": "CUSTOM_C"})
    assert standard.status_code == 400
    assert "Cannot update standard resource class VCPU" in standard.text
    taken = client.simulate_put("/resource_classes/CUSTOM_A", json={"name": "CUSTOM_B"})
    assert taken.status_code == 409
    assert "Resource class already exists: CUSTOM_B" in taken.text
    to_standard = client.simulate_put("/resource_classes/CUSTOM_A", json={"name": "VCPU"})
    assert to_standard.status_code == 400
    missing = client.simulate_put("/resource_classes/CUSTOM_X", json={"name": "CUSTOM_Y"})
    assert missing.status_code == 404
    bodiless = client.simulate_put("/resource_classes/CUSTOM_A", headers=JSON)
    assert bodiless.status_code == 400
    assert "Malformed JSON:" in bodiless.text


def test_bodiless_put_from_1_7_creates_or_confirms(api, engine):
    client = api("1.7")
    first = client.simulate_put("/resource_classes/CUSTOM_COW")
    second = client.simulate_put("/resource_classes/CUSTOM_COW")
    assert (first.status_code, second.status_code) == (201, 204)
    for result in (first, second):
        assert result.headers["location"].endswith("/resource_classes/CUSTOM_COW")
        assert "content-type" not in result.headers
    assert class_ids(engine)["CUSTOM_COW"] >= 10000


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("COW", "Failed validating 'pattern'"),
        ("VCPU", "Failed validating 'pattern'"),
        ("CUSTOM_" + "S" * 249, "Failed validating 'maxLength'"),
    ],
)
def test_bodiless_put_refuses_non_custom_names(api, name, words):
    result = api("1.7").simulate_put(f"/resource_classes/{name}")
    assert result.status_code == 400
    assert words in result.text


def test_delete_rules(api, engine):
    client = api()
    client.simulate_put("/resource_classes/CUSTOM_GOLD")
    standard = client.simulate_delete("/resource_classes/VCPU")
    assert standard.status_code == 400
    assert "Cannot delete standard resource class" in standard.text

    use_class(engine, "CUSTOM_GOLD", allocate=True)
    in_use = client.simulate_delete("/resource_classes/CUSTOM_GOLD")
    assert in_use.status_code == 409
    assert "Error in delete resource class" in in_use.text
    assert "Class is in use in inventory" in in_use.text

    drop_usage(engine, t.inventories)  # allocations left behind still pin the class
    orphan = client.simulate_delete("/resource_classes/CUSTOM_GOLD")
    assert orphan.status_code == 409
    assert "Class is in use in allocations" in orphan.text

    drop_usage(engine, t.allocations)
    gone = client.simulate_delete("/resource_classes/CUSTOM_GOLD")
    assert gone.status_code == 204
    assert "content-type" not in gone.headers
    assert client.simulate_delete("/resource_classes/CUSTOM_GOLD").status_code == 404


def test_delete_is_masked_before_1_2(api):
    api().simulate_put("/resource_classes/CUSTOM_GOLD")
    assert api("1.1").simulate_delete("/resource_classes/CUSTOM_GOLD").status_code == 404
    assert api().simulate_get("/resource_classes/CUSTOM_GOLD").status_code == 200


def test_last_modified_on_gets_from_1_15_only(api):
    new, old = api("1.15"), api("1.14")
    created = new.simulate_put("/resource_classes/CUSTOM_MOO")
    posted = new.simulate_post("/resource_classes", json={"name": "CUSTOM_ALPHA"})
    for write in (created, posted):
        assert "last-modified" not in write.headers and "cache-control" not in write.headers
    for path in ("/resource_classes", "/resource_classes/VCPU", "/resource_classes/CUSTOM_MOO"):
        fresh = new.simulate_get(path)
        assert fresh.headers["cache-control"] == "no-cache"
        assert fresh.headers["last-modified"].endswith(" GMT")
        stale = old.simulate_get(path)
        assert "last-modified" not in stale.headers and "cache-control" not in stale.headers


def test_concurrent_creates_make_one_class_each(api, engine):
    """Racing creators of one name get one 201; different names get distinct ids."""
    client = api("1.7")
    names = [f"CUSTOM_RACE_{i % 4}" for i in range(16)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(
            pool.map(lambda n: client.simulate_put(f"/resource_classes/{n}").status_code, names)
        )
    assert sorted(statuses) == [201] * 4 + [204] * 12
    ids = class_ids(engine)
    assert sorted(ids[f"CUSTOM_RACE_{i}"] for i in range(4)) == [10000, 10001, 10002, 10003]


# The HTTP envelope as these requests show it.


def test_write_with_a_text_accept_still_runs_and_answers_in_text(api):
    result = api().simulate_post(
        "/resource_classes", json={"name": "FOO"}, headers={"accept": "text/plain"}
    )
    assert result.status_code == 400
    assert result.headers["content-type"].startswith("text/plain")
    assert "JSON does not validate" in result.text


def test_get_with_an_unacceptable_accept_is_406(api):
    result = api().simulate_get("/resource_classes", headers={"accept": "text/plain"})
    assert result.status_code == 406
    assert "Only application/json is provided" in result.text


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        ("text/html", "text/html"),
        ("text/html,application/json", "text/html"),
        ("application/json;q=0.9,text/html;q=0.5", "application/json"),
        ("*/*", "application/json"),
        ("text/plain", "text/plain"),
    ],
)
def test_error_media_type_follows_accept(api, accept, media):
    result = api().simulate_get(
        "/", headers={"accept": accept, "openstack-api-version": "placement 0.5"}
    )
    assert result.status_code == 406
    assert result.headers["content-type"].startswith(media)
    assert "Unacceptable version header: 0.5" in result.text
