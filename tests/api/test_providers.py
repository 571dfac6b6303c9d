"""/resource_providers and /resource_providers/{uuid}: create, show, list with
every filter, rename, (re-, un-)parent, delete; per microversion.

Inventories, allocations, traits and aggregates used by the filters are written
straight into the tables, so these tests need only the provider endpoints.
"""

from __future__ import annotations

import uuid as uuidlib

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction

AGG_A = "83a3d69d-8920-48e2-8914-cadfd8fa2f91"
AGG_B = "99652f11-9f77-46b9-80b7-4b1989be9f8c"
AGG_C = "282d469e-29e2-4a8a-8f2e-31b3202b696a"


@pytest.fixture
def rp(api):
    """`rp(name, parent=None, uuid=None)` creates a provider, returns its uuid."""

    def make(name: str, parent: str | None = None, uuid: str | None = None) -> str:
        body = {"name": name, "uuid": uuid or str(uuidlib.uuid4())}
        if parent:
            body["parent_provider_uuid"] = parent
        result = api().simulate_post("/resource_providers", json=body)
        assert result.status_code == 200, result.text
        return body["uuid"]

    return make


def _provider_id(conn: sa.Connection, uuid: str) -> int:
    return conn.execute(
        sa.select(t.resource_providers.c.id).where(t.resource_providers.c.uuid == uuid)
    ).scalar_one()


def _class_id(conn: sa.Connection, name: str) -> int:
    rc = t.resource_classes
    return conn.execute(sa.select(rc.c.id).where(rc.c.name == name)).scalar_one()


def add_inventory(engine, uuid, rc, total, **fields):
    with transaction(engine, write=True) as conn:
        row = dict(reserved=0, min_unit=1, max_unit=total, step_size=1, allocation_ratio=1.0)
        row.update(fields)
        conn.execute(
            t.inventories.insert().values(
                resource_provider_id=_provider_id(conn, uuid),
                resource_class_id=_class_id(conn, rc),
                total=total,
                **row,
            )
        )


def add_allocation(engine, uuid, rc, used):
    with transaction(engine, write=True) as conn:
        conn.execute(
            t.allocations.insert().values(
                resource_provider_id=_provider_id(conn, uuid),
                consumer_id=str(uuidlib.uuid4()),
                resource_class_id=_class_id(conn, rc),
                used=used,
            )
        )


def add_traits(engine, uuid, *names):
    with transaction(engine, write=True) as conn:
        for name in names:
            trait_id = conn.execute(
                sa.select(t.traits.c.id).where(t.traits.c.name == name)
            ).scalar_one_or_none()
            if trait_id is None:
                trait_id = conn.execute(t.traits.insert().values(name=name)).inserted_primary_key[0]
            conn.execute(
                t.resource_provider_traits.insert().values(
                    resource_provider_id=_provider_id(conn, uuid), trait_id=trait_id
                )
            )


def add_aggregates(engine, uuid, *agg_uuids):
    agg = t.placement_aggregates
    with transaction(engine, write=True) as conn:
        for agg_uuid in agg_uuids:
            agg_id = conn.execute(
                sa.select(agg.c.id).where(agg.c.uuid == agg_uuid)
            ).scalar_one_or_none()
            if agg_id is None:
                agg_id = conn.execute(agg.insert().values(uuid=agg_uuid)).inserted_primary_key[0]
            conn.execute(
                t.resource_provider_aggregates.insert().values(
                    resource_provider_id=_provider_id(conn, uuid), aggregate_id=agg_id
                )
            )


def names(result) -> list[str]:
    assert result.status_code == 200, result.text
    return sorted(p["name"] for p in result.json["resource_providers"])


def error(result, status: int) -> dict:
    assert result.status_code == status, result.text
    return result.json["errors"][0]


# --- create -----------------------------------------------------------------


def test_create_before_1_20_is_201_without_body(api):
    rp_uuid = str(uuidlib.uuid4())
    result = api("1.19").simulate_post("/resource_providers", json={"name": "old", "uuid": rp_uuid})
    assert result.status_code == 201
    assert result.headers["location"] == f"http://falconframework.org/resource_providers/{rp_uuid}"
    assert "content-type" not in result.headers
    assert result.text == ""


def test_create_from_1_20_returns_the_provider(api):
    result = api("1.20").simulate_post("/resource_providers", json={"name": "new"})
    assert result.status_code == 200
    body = result.json
    assert result.headers["location"].endswith(f"/resource_providers/{body['uuid']}")
    assert uuidlib.UUID(body["uuid"])  # generated when not given
    assert (body["name"], body["generation"]) == ("new", 0)
    assert body["parent_provider_uuid"] is None
    assert body["root_provider_uuid"] == body["uuid"]
    assert result.headers["cache-control"] == "no-cache"
    assert result.headers["last-modified"].endswith(" GMT")


def test_create_stores_dashless_uuid_in_canonical_form(api):
    result = api().simulate_post(
        "/resource_providers", json={"name": "x", "uuid": "2290D4AF9E6E400B9D651EE01376F71A"}
    )
    assert result.json["uuid"] == "2290d4af-9e6e-400b-9d65-1ee01376f71a"
    again = api().simulate_post(
        "/resource_providers",
        json={"name": "y", "uuid": "2290d4af-9e6e-400b-9d65-1ee01376f71a"},
    )
    assert (
        "uuid: 2290d4af-9e6e-400b-9d65-1ee01376f71a already exists" in error(again, 409)["detail"]
    )


def test_duplicate_name_or_uuid_is_409_duplicate_name(api, rp):
    first = rp("shared disk")
    by_name = error(
        api().simulate_post(
            "/resource_providers", json={"name": "shared disk", "uuid": str(uuidlib.uuid4())}
        ),
        409,
    )
    assert by_name["code"] == "placement.duplicate_name"
    assert "Conflicting resource provider name: shared disk already exists" in by_name["detail"]
    by_uuid = error(
        api().simulate_post("/resource_providers", json={"name": "other", "uuid": first}), 409
    )
    assert f"Conflicting resource provider uuid: {first}" in by_uuid["detail"]
    # as upstream: a parent that does not exist is told before the taken name
    orphan = api().simulate_post(
        "/resource_providers",
        json={"name": "shared disk", "parent_provider_uuid": str(uuidlib.uuid4())},
    )
    assert "parent provider UUID does not exist" in error(orphan, 400)["detail"]


@pytest.mark.parametrize(
    ("version", "body", "words"),
    [
        ("latest", {"name": "x" * 201}, "Failed validating 'maxLength'"),
        ("latest", {"name": "x", "uuid": "not a uuid"}, "Failed validating 'format'"),
        ("latest", {"uuid": str(uuidlib.uuid4())}, "'name' is a required property"),
        ("latest", {"name": "x", "generation": 3}, "Additional properties are not allowed"),
        ("1.13", {"name": "x", "parent_provider_uuid": AGG_A}, "JSON does not validate"),
    ],
)
def test_create_rejects_bad_bodies(api, version, body, words):
    assert (
        words in error(api(version).simulate_post("/resource_providers", json=body), 400)["detail"]
    )


def test_create_needs_json(api):
    result = api().simulate_post(
        "/resource_providers", body="name=x", headers={"content-type": "text/plain"}
    )
    assert "The media type text/plain is not supported" in error(result, 415)["detail"]
    malformed = api().simulate_post(
        "/resource_providers", body='{"name": }', headers={"content-type": "application/json"}
    )
    assert "Malformed JSON" in error(malformed, 400)["detail"]


def test_unicode_name_up_to_200_characters(api):
    name = "☃" * 200
    made = api().simulate_post("/resource_providers", json={"name": name})
    assert made.json["name"] == name
    found = api().simulate_get("/resource_providers", params={"name": name})
    assert [p["name"] for p in found.json["resource_providers"]] == [name]


def test_create_child_and_bad_parents(api, rp):
    parent = rp("parent")
    child = rp("child", parent=parent)
    grandchild = rp("grandchild", parent=child)
    shown = api().simulate_get(f"/resource_providers/{grandchild}").json
    assert (shown["parent_provider_uuid"], shown["root_provider_uuid"]) == (child, parent)
    me = str(uuidlib.uuid4())
    own = api().simulate_post(
        "/resource_providers", json={"name": "me", "uuid": me, "parent_provider_uuid": me}
    )
    detail = error(own, 400)["detail"]
    assert f'Unable to create resource provider "me", {me}:' in detail
    assert "parent provider UUID cannot be same as UUID" in detail
    missing = api().simulate_post(
        "/resource_providers", json={"name": "orphan", "parent_provider_uuid": AGG_A}
    )
    assert "parent provider UUID does not exist" in error(missing, 400)["detail"]


# --- show -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "rels"),
    [
        ("1.0", {"self", "inventories", "usages"}),
        ("1.1", {"self", "inventories", "usages", "aggregates"}),
        ("1.5", {"self", "inventories", "usages", "aggregates"}),
        ("1.6", {"self", "inventories", "usages", "aggregates", "traits"}),
        ("1.11", {"self", "inventories", "usages", "aggregates", "traits", "allocations"}),
        ("1.39", {"self", "inventories", "usages", "aggregates", "traits", "allocations"}),
    ],
)
def test_links_per_microversion(api, rp, version, rels):
    rp_uuid = rp("linked")
    links = api(version).simulate_get(f"/resource_providers/{rp_uuid}").json["links"]
    assert {link["rel"] for link in links} == rels
    for link in links:
        suffix = "" if link["rel"] == "self" else f"/{link['rel']}"
        assert link["href"] == f"/resource_providers/{rp_uuid}{suffix}"


def test_tree_fields_from_1_14_and_cache_headers_from_1_15(api, rp):
    rp_uuid = rp("p")
    old = api("1.13").simulate_get(f"/resource_providers/{rp_uuid}")
    assert set(old.json) == {"uuid", "name", "generation", "links"}
    assert "last-modified" not in old.headers and "cache-control" not in old.headers
    at_14 = api("1.14").simulate_get(f"/resource_providers/{rp_uuid}")
    assert at_14.json["root_provider_uuid"] == rp_uuid
    assert "last-modified" not in at_14.headers
    at_15 = api("1.15").simulate_get(f"/resource_providers/{rp_uuid}")
    assert at_15.headers["cache-control"] == "no-cache"
    assert at_15.headers["last-modified"].endswith(" GMT")


def test_show_unknown_provider_is_404(api):
    missing = str(uuidlib.uuid4())
    detail = error(api().simulate_get(f"/resource_providers/{missing}"), 404)["detail"]
    assert detail == f"No resource provider with uuid {missing} found"
    assert api().simulate_get("/resource_providers/random_sauce").status_code == 404


def test_non_admin_is_forbidden(api):
    result = api().simulate_get("/resource_providers", headers={"x-auth-token": "user"})
    assert error(result, 403)["title"] == "Forbidden"


# --- list -------------------------------------------------------------------


def test_list_empty_has_cache_headers_from_1_15(api):
    result = api("1.15").simulate_get("/resource_providers")
    assert result.json == {"resource_providers": []}
    assert result.headers["last-modified"].endswith(" GMT")
    assert "cache-control" not in api("1.14").simulate_get("/resource_providers").headers


def test_list_by_name_and_uuid(api, rp):
    first = rp("first")
    rp("second")
    assert names(api().simulate_get("/resource_providers")) == ["first", "second"]
    assert names(api().simulate_get("/resource_providers?name=second")) == ["second"]
    assert names(api().simulate_get(f"/resource_providers?uuid={first}")) == ["first"]
    assert names(api().simulate_get("/resource_providers?name=nobody")) == []


@pytest.mark.parametrize(
    ("version", "query"),
    [
        ("latest", "uuid=spameggs"),
        ("latest", "spam=eggs"),
        ("latest", "in_tree=not-a-uuid"),
        ("1.2", f"member_of={AGG_A}"),
        ("1.3", "resources=VCPU:1"),
        ("1.13", f"in_tree={AGG_A}"),
        ("1.17", "required=HW_CPU_X86_SGX"),
    ],
)
def test_list_rejects_parameters_unknown_at_the_microversion(api, version, query):
    detail = error(api(version).simulate_get(f"/resource_providers?{query}"), 400)["detail"]
    assert "Invalid query string parameters" in detail


def test_list_in_tree(api, rp):
    root = rp("root")
    child = rp("child", parent=root)
    rp("grandchild", parent=child)
    rp("elsewhere")
    expected = ["child", "grandchild", "root"]
    assert names(api().simulate_get(f"/resource_providers?in_tree={child}")) == expected
    assert names(api().simulate_get(f"/resource_providers?in_tree={AGG_A}")) == []


def test_list_by_resources_is_capacity_aware(api, rp, engine):
    big = rp("big")
    small = rp("small")
    add_inventory(
        engine, big, "DISK_GB", 2048, reserved=48, min_unit=10, max_unit=1000, step_size=10
    )
    add_inventory(engine, big, "VCPU", 4, allocation_ratio=2.0)
    add_inventory(engine, small, "VCPU", 8)
    add_allocation(engine, small, "VCPU", 6)
    add_allocation(engine, big, "VCPU", 5)

    def found(resources: str) -> list[str]:
        return names(api().simulate_get(f"/resource_providers?resources={resources}"))

    assert found("DISK_GB:500") == ["big"]
    assert found("DISK_GB:5") == []  # under min_unit
    assert found("DISK_GB:1010") == []  # over max_unit
    assert found("DISK_GB:15") == []  # not a step_size multiple
    assert found("VCPU:2") == ["big", "small"]  # 8 - 6 left; (4 * 2.0) - 5 left
    assert found("VCPU:3") == ["big"]
    assert found("VCPU:4") == []
    assert found("DISK_GB:500,VCPU:3") == ["big"]
    assert found("MEMORY_MB:1") == []


def test_list_by_resources_sums_usage_per_class(api, rp, engine):
    host = rp("host")
    add_inventory(engine, host, "VCPU", 8)
    add_inventory(engine, host, "MEMORY_MB", 1024)
    for _ in range(3):  # three consumers: 6 of 8 VCPU used
        add_allocation(engine, host, "VCPU", 2)
    add_allocation(engine, host, "MEMORY_MB", 512)
    leftover = rp("leftover")  # allocations of a class it has no inventory of (any more)
    add_inventory(engine, leftover, "MEMORY_MB", 4096)
    add_allocation(engine, leftover, "VCPU", 1)

    def found(resources: str) -> list[str]:
        return names(api().simulate_get(f"/resource_providers?resources={resources}"))

    assert found("VCPU:2") == ["host"]
    assert found("VCPU:3") == []
    assert found("VCPU:2,MEMORY_MB:512") == ["host"]
    assert found("VCPU:2,MEMORY_MB:513") == []
    assert found("MEMORY_MB:512") == ["host", "leftover"]
    assert found("MEMORY_MB:513") == ["leftover"]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "Got: empty string."),
        ("VCPU", "Got: VCPU."),
        ("DISK_GB:500,", "Got: ."),
        ("VCPU:fred", "Requested resource VCPU expected positive integer amount. Got: fred."),
        ("VCPU:-2", "Requested resource VCPU requires amount >= 1. Got: -2."),
        ("NOPE:1", "Invalid resource class in resources parameter: No such resource class NOPE."),
    ],
)
def test_list_rejects_bad_resources(api, value, words):
    result = api().simulate_get("/resource_providers", params={"resources": value})
    assert words in error(result, 400)["detail"]


@pytest.fixture
def traited(api, rp, engine):
    """left: FOO, SSD; middle: MMX, SSD; right: none."""
    left, middle = rp("left"), rp("middle")
    rp("right")
    add_traits(engine, left, "CUSTOM_FOO", "STORAGE_DISK_SSD")
    add_traits(engine, middle, "HW_CPU_X86_MMX", "STORAGE_DISK_SSD")


@pytest.mark.parametrize(
    ("version", "query", "expected"),
    [
        ("1.18", "required=STORAGE_DISK_SSD", ["left", "middle"]),
        ("1.18", "required=STORAGE_DISK_SSD,CUSTOM_FOO", ["left"]),
        ("1.18", "required=HW_CPU_X86_SGX", []),
        ("1.22", "required=!CUSTOM_FOO", ["middle", "right"]),
        ("1.22", "required=!CUSTOM_FOO,!HW_CPU_X86_MMX", ["right"]),
        ("1.22", "required=STORAGE_DISK_SSD,!CUSTOM_FOO", ["middle"]),
        ("1.22", "required=!HW_CPU_X86_SGX", ["left", "middle", "right"]),
        # before 1.39 a repeated `required` counts with its last value only
        ("1.38", "required=CUSTOM_FOO&required=HW_CPU_X86_MMX", ["middle"]),
        ("1.39", "required=CUSTOM_FOO&required=HW_CPU_X86_MMX", []),
        ("1.39", "required=in:CUSTOM_FOO,HW_CPU_X86_MMX", ["left", "middle"]),
        ("1.39", "required=in:CUSTOM_FOO,HW_CPU_X86_MMX&required=!CUSTOM_FOO", ["middle"]),
    ],
)
def test_list_by_traits(api, traited, version, query, expected):
    assert names(api(version).simulate_get(f"/resource_providers?{query}")) == expected


@pytest.mark.parametrize(
    ("version", "value", "words"),
    [
        ("1.21", "!CUSTOM_FOO", "form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !CUSTOM_FOO"),
        ("1.21", "", "form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait"),
        ("1.22", "", "form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait"),
        ("1.22", "STORAGE_DISK_SSD,,CUSTOM_FOO", "Got an empty trait"),
        ("1.38", "in:CUSTOM_FOO", "only supported since microversion 1.39"),
        ("1.39", "in:CUSTOM_FOO,!HW_CPU_X86_MMX", "does not support forbidden traits"),
        ("1.39", "STORAGE_DISK_SSD,BOGUS_TRAIT", "No such trait(s): BOGUS_TRAIT."),
        ("1.39", "!BOGUS_TRAIT", "No such trait(s): BOGUS_TRAIT."),
    ],
)
def test_list_rejects_bad_required(api, traited, version, value, words):
    result = api(version).simulate_get("/resource_providers", params={"required": value})
    assert words in error(result, 400)["detail"]


@pytest.fixture
def aggregated(api, rp, engine):
    """rp_1: A, C; rp_2: A, B; rp_3: none."""
    one, two = rp("rp_1"), rp("rp_2")
    rp("rp_3")
    add_aggregates(engine, one, AGG_A, AGG_C)
    add_aggregates(engine, two, AGG_A, AGG_B)


@pytest.mark.parametrize(
    ("version", "query", "expected"),
    [
        ("1.3", f"member_of={AGG_B}", ["rp_2"]),
        ("1.3", f"member_of=in:{AGG_B},{AGG_C}", ["rp_1", "rp_2"]),
        ("1.3", "member_of=in:d67370b5-4dc0-470d-a4fa-85e8e89abc6c", []),
        ("1.24", f"member_of={AGG_A}&member_of={AGG_B}", ["rp_2"]),
        ("1.24", f"member_of={AGG_B}&member_of={AGG_C}", []),
        ("1.24", f"member_of={AGG_A}&member_of=in:{AGG_B},{AGG_C}", ["rp_1", "rp_2"]),
        ("1.32", f"member_of=!{AGG_C}", ["rp_2", "rp_3"]),
        ("1.32", f"member_of=!in:{AGG_B},{AGG_C}", ["rp_3"]),
        ("1.32", f"member_of=!{AGG_C}&member_of={AGG_A}", ["rp_2"]),
        ("1.32", f"member_of=!{AGG_C}&member_of={AGG_C}", []),
        ("1.32", "member_of=!d67370b5-4dc0-470d-a4fa-85e8e89abc6c", ["rp_1", "rp_2", "rp_3"]),
    ],
)
def test_list_by_aggregates(api, aggregated, version, query, expected):
    assert names(api(version).simulate_get(f"/resource_providers?{query}")) == expected


@pytest.mark.parametrize(
    ("version", "query", "words"),
    [
        ("1.23", f"member_of={AGG_A}&member_of={AGG_B}", "Multiple member_of parameters"),
        ("1.31", f"member_of=!{AGG_A}", "Forbidden member_of parameters are not supported"),
        ("1.32", "member_of=!(^o^)", "Expected 'member_of' parameter to contain valid UUID(s)."),
        ("1.32", "member_of=not+a+uuid", "to contain valid UUID(s). Got: not a uuid"),
        ("1.32", f"member_of={AGG_A},{AGG_B}", "must be prefixed with the 'in:' or '!in:'"),
    ],
)
def test_list_rejects_bad_member_of(api, version, query, words):
    detail = error(api(version).simulate_get(f"/resource_providers?{query}"), 400)["detail"]
    assert words in detail


def test_filters_and_together(api, rp, engine):
    root = rp("root")
    child = rp("child", parent=root)
    other = rp("other")
    for uuid in (child, other):
        add_traits(engine, uuid, "STORAGE_DISK_SSD")
        add_aggregates(engine, uuid, AGG_A)
        add_inventory(engine, uuid, "VCPU", 4)
    query = f"required=STORAGE_DISK_SSD&member_of={AGG_A}&resources=VCPU:4&in_tree={root}"
    assert names(api().simulate_get(f"/resource_providers?{query}")) == ["child"]


# --- update -----------------------------------------------------------------


def test_rename_keeps_generation_and_updates_last_modified(api, rp):
    rp_uuid = rp("before")
    result = api("1.15").simulate_put(f"/resource_providers/{rp_uuid}", json={"name": "after"})
    assert result.status_code == 200
    assert (result.json["name"], result.json["generation"]) == ("after", 0)
    assert result.headers["last-modified"].endswith(" GMT")
    assert "location" not in result.headers
    assert api().simulate_get(f"/resource_providers/{rp_uuid}").json["name"] == "after"


def test_rename_to_taken_name_is_409(api, rp):
    rp("taken")
    mine = rp("mine")
    result = api().simulate_put(f"/resource_providers/{mine}", json={"name": "taken"})
    assert error(result, 409)["code"] == "placement.duplicate_name"


@pytest.mark.parametrize(
    ("version", "body", "words"),
    [
        ("latest", {"badfield": "x"}, "JSON does not validate"),
        ("latest", {"name": "x", "uuid": AGG_A}, "Additional properties are not allowed"),
        ("latest", {"name": "x" * 201}, "Failed validating 'maxLength'"),
        ("1.13", {"name": "x", "parent_provider_uuid": AGG_A}, "JSON does not validate"),
    ],
)
def test_update_rejects_bad_bodies(api, rp, version, body, words):
    rp_uuid = rp("p")
    result = api(version).simulate_put(f"/resource_providers/{rp_uuid}", json=body)
    assert words in error(result, 400)["detail"]


def test_update_unknown_provider_is_404(api):
    result = api().simulate_put(f"/resource_providers/{AGG_A}", json={"name": "x"})
    assert error(result, 404)["title"] == "Not Found"


def test_give_a_root_its_first_parent_from_1_14(api, rp):
    parent = rp("parent")
    child = rp("child")
    grandchild = rp("grandchild", parent=child)
    result = api("1.14").simulate_put(
        f"/resource_providers/{child}", json={"name": "child", "parent_provider_uuid": parent}
    )
    assert result.json["parent_provider_uuid"] == parent
    assert result.json["root_provider_uuid"] == parent
    below = api().simulate_get(f"/resource_providers/{grandchild}").json
    assert below["root_provider_uuid"] == parent  # the subtree moved along
    same = api("1.14").simulate_put(
        f"/resource_providers/{child}", json={"name": "child", "parent_provider_uuid": parent}
    )
    assert same.status_code == 200


def test_reparent_and_unparent_need_1_37(api, rp):
    first, second = rp("first"), rp("second")
    child = rp("child", parent=first)
    grandchild = rp("grandchild", parent=child)
    move = {"name": "child", "parent_provider_uuid": second}
    old = api("1.36").simulate_put(f"/resource_providers/{child}", json=move)
    assert "re-parenting a provider is not currently allowed" in error(old, 400)["detail"]
    drop = {"name": "child", "parent_provider_uuid": None}
    old = api("1.36").simulate_put(f"/resource_providers/{child}", json=drop)
    assert "un-parenting a provider is not currently allowed" in error(old, 400)["detail"]

    moved = api("1.37").simulate_put(f"/resource_providers/{child}", json=move).json
    assert (moved["parent_provider_uuid"], moved["root_provider_uuid"]) == (second, second)
    assert (
        api().simulate_get(f"/resource_providers/{grandchild}").json["root_provider_uuid"] == second
    )
    dropped = api("1.37").simulate_put(f"/resource_providers/{child}", json=drop).json
    assert (dropped["parent_provider_uuid"], dropped["root_provider_uuid"]) == (None, child)
    assert (
        api().simulate_get(f"/resource_providers/{grandchild}").json["root_provider_uuid"] == child
    )
    assert names(api().simulate_get(f"/resource_providers?in_tree={second}")) == ["second"]


def test_parent_loops_and_missing_parents_are_400(api, rp):
    root = rp("root")
    child = rp("child", parent=root)
    grandchild = rp("grandchild", parent=child)
    for parent in (root, grandchild):
        result = api().simulate_put(
            f"/resource_providers/{root}", json={"name": "root", "parent_provider_uuid": parent}
        )
        assert "creating loop in the provider tree is not allowed" in error(result, 400)["detail"]
    result = api().simulate_put(
        f"/resource_providers/{root}", json={"name": "root", "parent_provider_uuid": AGG_A}
    )
    assert "parent provider UUID does not exist" in error(result, 400)["detail"]


# --- delete -----------------------------------------------------------------


def test_delete_removes_provider_and_its_links(api, rp, engine):
    rp_uuid = rp("doomed")
    add_inventory(engine, rp_uuid, "VCPU", 4)
    add_traits(engine, rp_uuid, "CUSTOM_DOOMED")
    add_aggregates(engine, rp_uuid, AGG_A)
    result = api().simulate_delete(f"/resource_providers/{rp_uuid}")
    assert result.status_code == 204
    assert "content-type" not in result.headers
    with transaction(engine) as conn:
        for table in (t.inventories, t.resource_provider_traits, t.resource_provider_aggregates):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0
    again = api().simulate_delete(f"/resource_providers/{rp_uuid}")
    assert (
        error(again, 404)["detail"] == f"No resource provider with uuid {rp_uuid} found for delete"
    )


def test_delete_parent_with_children_is_409(api, rp):
    parent = rp("parent")
    child = rp("child", parent=parent)
    result = error(api().simulate_delete(f"/resource_providers/{parent}"), 409)
    assert result["code"] == "placement.resource_provider.cannot_delete_parent"
    assert f"Unable to delete parent resource provider {parent}: It has child" in result["detail"]
    assert api().simulate_delete(f"/resource_providers/{child}").status_code == 204
    assert api().simulate_delete(f"/resource_providers/{parent}").status_code == 204


def test_delete_provider_with_allocations_is_409(api, rp, engine):
    rp_uuid = rp("busy")
    add_inventory(engine, rp_uuid, "VCPU", 4)
    add_allocation(engine, rp_uuid, "VCPU", 1)
    result = error(api().simulate_delete(f"/resource_providers/{rp_uuid}"), 409)
    assert result["code"] == "placement.resource_provider.inuse"
    assert api().simulate_get(f"/resource_providers/{rp_uuid}").status_code == 200
