"""The input domain (issue 11, items 2 and 3): every value a client sends is
checked at the edge, the same way on SQLite, PostgreSQL and MySQL. A value
outside the domain is a 400 with Placement's error body, naming the field, and
nothing is written; never a 500. The rules are in `tally.placement.schemas.domain`:

    JSON         nests at most 64 deep; no lone surrogate; finite numbers
    any string   no NUL (body, path segment, query key or value); valid UTF-8
    integers     what an INT column holds: amounts, counts <= 2^31 - 1 (a larger
                 candidates limit means no limit, as upstream)
    capacity     (total - reserved) * allocation_ratio <= 2^53 - 1
    uuids        any spelling uuid.UUID reads, used lower-case and hyphenated

Each test reads the whole database before and after a refused request
(`rows`), so "nothing written" covers every table.

    rp    (VCPU 8, MEMORY_MB 1024)      holds nothing
"""

from __future__ import annotations

import uuid as uuidlib
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.transaction import transaction
from tests.builders import provider_with_inventory

MAX_INT = 2**31 - 1
MAX_CAPACITY = 2**53 - 1
JSON = {"content-type": "application/json"}


@pytest.fixture
def rp(engine: sa.Engine) -> str:
    return provider_with_inventory(engine, VCPU=8, MEMORY_MB=1024)


def rows(engine: sa.Engine) -> dict[str, list[tuple]]:
    """Every row of every table, to compare before and after a refusal."""
    with transaction(engine) as conn:
        return {
            table.name: sorted(tuple(map(str, row)) for row in conn.execute(sa.select(table)))
            for table in t.metadata.sorted_tables
        }


def refused(result, *words: str) -> str:
    """A 400 in Placement's error shape whose detail holds `words`; the detail."""
    assert result.status_code == 400, result.text
    (error,) = result.json["errors"]
    assert set(error) - {"code"} == {"status", "title", "detail", "request_id"}
    assert (error["status"], error["title"]) == (400, "Bad Request")
    assert error.get("code", "placement.undefined_code") == "placement.undefined_code"  # 1.23+
    assert error["request_id"] == result.headers["openstack-request-id"]
    for word in words:
        assert word in error["detail"], error["detail"]
    return error["detail"]


def claim(rp: str, amount: int = 1, generation: int | None = None, rc: str = "VCPU") -> dict:
    return {
        "allocations": {rp: {"resources": {rc: amount}}},
        "project_id": "proj",
        "user_id": "user",
        "consumer_generation": generation,
        "consumer_type": "INSTANCE",
    }


def nested(depth: int) -> str:
    """A provider body whose deepest value sits `depth` arrays/objects down."""
    return '{"name": "deep", "x": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


# ---------------------------------------------------------------- JSON bodies


@pytest.mark.parametrize("body", ["[" * 1000 + "]" * 1000, nested(65), nested(990)])
def test_json_nested_deeper_than_64_is_refused(api, engine, body):
    before = rows(engine)
    result = api().simulate_post("/resource_providers", body=body, headers=JSON)
    refused(result, "Malformed JSON", "deeper than 64 levels")
    assert rows(engine) == before


def test_json_nested_64_deep_is_parsed(api):
    """At the bound the document is read (and then fails its schema)."""
    result = api().simulate_post("/resource_providers", body=nested(64), headers=JSON)
    refused(result, "JSON does not validate", "Additional properties")
    brackets_in_strings = '{"name": "' + "[" * 100 + '"}'
    result = api().simulate_post("/resource_providers", body=brackets_in_strings, headers=JSON)
    assert result.status_code == 200, result.text


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/resource_providers", '{"name": "a\\ud800"}', "JSON string at ['name']"),
        ("/resource_providers", '{"name": "\\udc00b"}', "JSON string at ['name']"),
        (
            "/resource_providers/{rp}/inventories",
            '{"resource_provider_generation": 0, "inventories": {"VCPU\\ud800": {"total": 1}}}',
            "JSON key in ['inventories']",
        ),
    ],
)
def test_lone_surrogate_is_refused(api, engine, rp, path, body, field):
    before = rows(engine)
    method = "POST" if path == "/resource_providers" else "PUT"
    result = api().simulate_request(method, path.format(rp=rp), body=body, headers=JSON)
    refused(result, field, "not valid UTF-8", "lone surrogate")
    assert rows(engine) == before


def test_surrogate_pair_is_one_character_on_every_backend(api):
    result = api().simulate_post(
        "/resource_providers", body='{"name": "vm \\ud83d\\ude00"}', headers=JSON
    )
    assert result.status_code == 200, result.text
    shown = api().simulate_get(urlsplit(result.headers["location"]).path)
    assert shown.json["name"] == "vm \U0001f600"


def test_body_that_is_not_utf8_or_not_finite_is_refused(api, engine):
    before = rows(engine)
    result = api().simulate_post("/resource_providers", body=b'{"name": "\xff"}', headers=JSON)
    refused(result, "Malformed JSON", "not valid UTF-8")
    body = '{"resource_class": "VCPU", "total": 1, "allocation_ratio": 1e400}'
    refused(api().simulate_post("/resource_providers/x/inventories", body=body, headers=JSON))
    assert rows(engine) == before


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/resource_providers", lambda rp: {"name": "a\x00b"}, "['name']"),
        ("PUT", "/resource_providers/{rp}", lambda rp: {"name": "\x00"}, "['name']"),
        (
            "PUT",
            "/resource_providers/{rp}/traits",
            lambda rp: {"traits": ["CUSTOM_A\x00"], "resource_provider_generation": 0},
            "['traits'][0]",
        ),
        (
            "PUT",
            "/allocations/{consumer}",
            lambda rp: {**claim(rp), "project_id": "p\x00"},
            "['project_id']",
        ),
        ("POST", "/resource_classes", lambda rp: {"name": "CUSTOM_\x00"}, "['name']"),
    ],
)
def test_nul_in_a_body_string_is_refused(api, engine, rp, method, path, body, field):
    """PostgreSQL cannot store a NUL; no backend takes one."""
    before = rows(engine)
    where = path.format(rp=rp, consumer=uuidlib.uuid4())
    result = api().simulate_request(method, where, json=body(rp))
    refused(result, f"Invalid JSON string at {field}", "NUL characters are not allowed")
    assert rows(engine) == before


# ---------------------------------------------------------------- paths and query strings


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("GET", "/resource_providers/a%00b", "path parameter 'uuid'"),
        ("DELETE", "/resource_providers/a%00b", "path parameter 'uuid'"),
        ("GET", "/resource_providers/{rp}/inventories/VC%00PU", "path parameter 'resource_class'"),
        ("PUT", "/traits/CUSTOM_A%00B", "path parameter 'name'"),
        ("PUT", "/resource_classes/CUSTOM_A%00B", "path parameter 'name'"),
        ("GET", "/allocations/%00", "path parameter 'consumer_uuid'"),
        ("DELETE", "/allocations/%00", "path parameter 'consumer_uuid'"),
        ("GET", "/resource_providers?name=a%00", "query string parameter 'name'"),
        ("GET", "/resource_providers?uuid=%00", "query string parameter 'uuid'"),
        ("GET", "/usages?project_id=p%00", "query string parameter 'project_id'"),
        ("GET", "/traits?name=in:CUSTOM_%00", "query string parameter 'name'"),
        (
            "GET",
            "/allocation_candidates?resources=VCPU:1&required=CUSTOM_%00",
            "query string parameter 'required'",
        ),
        ("GET", "/resource_providers?na%00me=x", "query string parameter name"),
    ],
)
def test_nul_in_a_path_or_query_is_refused(api, engine, rp, method, path, field):
    before = rows(engine)
    path, _, query = path.format(rp=rp).partition("?")
    result = api().simulate_request(method, path, query_string=query or None)
    refused(result, f"Invalid {field}", "NUL characters are not allowed")
    assert rows(engine) == before


@pytest.mark.parametrize("query", ["name=%FF", "name=%ED%A0%80", "na%C0%80me=x"])
def test_query_that_is_not_utf8_is_refused(api, query):
    result = api().simulate_get("/resource_providers", query_string=query)
    refused(result, "query string is not valid UTF-8")


def test_path_that_is_not_utf8_is_refused(api, rp):
    """A WSGI server hands the path's bytes over as latin-1 (PEP 3333)."""
    raw = f"/resource_providers/{rp}/inventories/VCPU\xff"  # the byte 0xFF, alone
    result = api().simulate_get("/", extras={"PATH_INFO": raw})
    refused(result, "Invalid path: not valid UTF-8")


# ---------------------------------------------------------------- integers


@pytest.mark.parametrize("amount", [MAX_INT + 1, 2**63, 2**64 + 1])
@pytest.mark.parametrize(
    ("path", "query", "version"),
    [
        ("/resource_providers", "resources=VCPU:{n}", "latest"),
        ("/resource_providers", "resources=MEMORY_MB:1,VCPU:{n}", "1.4"),
        ("/allocation_candidates", "resources=VCPU:{n}", "latest"),
        (
            "/allocation_candidates",
            "resources=VCPU:1&resources1=VCPU:{n}&group_policy=none",
            "1.25",
        ),
    ],
)
def test_query_amount_beyond_an_int_column_finds_nothing(
    api, engine, rp, path, query, version, amount
):
    """A query amount is a question, not a write: past what an int column holds it
    answers 200 with nothing fitting, as upstream (nova's heal-port test asks for a
    100 Gbit/s port's bandwidth so), even beside a capacity past an int."""
    vast = {"total": MAX_INT, "max_unit": MAX_INT, "allocation_ratio": 1000.0}
    provider_with_inventory(engine, VCPU=vast, MEMORY_MB=1024)
    result = api(version).simulate_get(path, query_string=query.format(n=amount))
    assert result.status_code == 200, result.text
    found = result.json
    assert found.get("resource_providers", found.get("allocation_requests")) == []


@pytest.mark.parametrize("limit", [MAX_INT + 1, 2**63, 10**30])
def test_candidates_limit_beyond_any_count_means_no_limit(api, rp, limit):
    """As upstream reads it: the limit is only compared in Python, never stored."""
    result = api().simulate_get(
        "/allocation_candidates", query_string=f"resources=VCPU:1&limit={limit}"
    )
    assert result.status_code == 200, result.text
    assert len(result.json["allocation_requests"]) == 1


def test_largest_amount_is_answered_on_every_backend(api, engine):
    big = provider_with_inventory(engine, VCPU={"total": MAX_INT, "max_unit": MAX_INT})
    client = api()
    found = client.simulate_get("/resource_providers", query_string=f"resources=VCPU:{MAX_INT}")
    assert [p["uuid"] for p in found.json["resource_providers"]] == [big]
    found = client.simulate_get(
        "/allocation_candidates", query_string=f"resources=VCPU:{MAX_INT}&limit={MAX_INT}"
    )
    assert found.status_code == 200, found.text
    assert list(found.json["provider_summaries"]) == [big]


CONSUMER = "5a1ad6d6-0d71-4a8b-9d5f-4c9a1b7e0c11"


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        (
            "PUT",
            "/allocations/{consumer}",
            lambda rp: claim(rp, MAX_INT + 1),
            "['allocations']['{rp}']['resources']['VCPU']",
        ),
        (
            "PUT",
            "/allocations/{consumer}",
            lambda rp: claim(rp, 2**64),
            "['allocations']['{rp}']['resources']['VCPU']",
        ),
        (
            "POST",
            "/allocations",
            lambda rp: {CONSUMER: claim(rp, MAX_INT + 1)},
            f"['{CONSUMER}']['allocations']['{{rp}}']['resources']['VCPU']",
        ),
        (
            "PUT",
            "/allocations/{consumer}",
            lambda rp: claim(rp, 1, 2**31),
            "['consumer_generation']",
        ),
        (
            "PUT",
            "/resource_providers/{rp}/inventories",
            lambda rp: {"resource_provider_generation": 2**31, "inventories": {}},
            "['resource_provider_generation']",
        ),
        (
            "PUT",
            "/resource_providers/{rp}/inventories",
            lambda rp: {
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": 2**63}},
            },
            "['inventories']['VCPU']['total']",
        ),
        (
            "POST",
            "/resource_providers/{rp}/inventories",
            lambda rp: {"resource_class": "DISK_GB", "total": 10, "max_unit": MAX_INT + 1},
            "['max_unit']",
        ),
        (
            "PUT",
            "/resource_providers/{rp}/traits",
            lambda rp: {"traits": [], "resource_provider_generation": -(2**31) - 1},
            "['resource_provider_generation']",
        ),
        (
            "PUT",
            "/resource_providers/{rp}/aggregates",
            lambda rp: {"aggregates": [], "resource_provider_generation": 2**70},
            "['resource_provider_generation']",
        ),
    ],
)
def test_body_integer_beyond_an_int_column_is_refused(api, engine, rp, method, path, body, field):
    before = rows(engine)
    result = api().simulate_request(method, path.format(rp=rp, consumer=CONSUMER), json=body(rp))
    detail = refused(result, "JSON does not validate", "Failed validating")
    assert detail.endswith(f"On instance{field.format(rp=rp)}"), detail
    assert rows(engine) == before


# ---------------------------------------------------------------- capacity


def test_inventory_whose_capacity_overflows_is_refused(api, engine, rp):
    """The inventory that made every GET /allocation_candidates a 500 on PostgreSQL."""
    client = api()
    before = rows(engine)
    too_big = {"total": MAX_INT, "allocation_ratio": 5e9}
    result = client.simulate_post(
        f"/resource_providers/{rp}/inventories", json={"resource_class": "DISK_GB", **too_big}
    )
    refused(result, "capacity of DISK_GB", "allocation_ratio", f"maximum of {MAX_CAPACITY}")
    result = client.simulate_put(
        f"/resource_providers/{rp}/inventories",
        json={"resource_provider_generation": 0, "inventories": {"VCPU": too_big}},
    )
    refused(result, "capacity of VCPU", "allocation_ratio")
    result = client.simulate_put(
        f"/resource_providers/{rp}/inventories/VCPU",
        json={"resource_provider_generation": 0, **too_big},
    )
    refused(result, "capacity of VCPU", "allocation_ratio")
    result = client.simulate_post(
        "/reshaper",
        json={
            "inventories": {
                rp: {"resource_provider_generation": 0, "inventories": {"VCPU": too_big}}
            },
            "allocations": {},
        },
    )
    refused(result, "capacity of VCPU", "allocation_ratio")
    assert rows(engine) == before
    found = client.simulate_get("/allocation_candidates", query_string="resources=VCPU:1")
    assert found.status_code == 200, found.text


def test_capacity_at_the_bound_is_exact_on_every_backend(api, rp):
    """(2^31 - 1) * 4194300 is just below 2^53; a ratio of 4194310 is refused.
    (Ratios of six significant digits: MySQL's FLOAT reads back no more.)"""
    client = api()
    body = {"resource_class": "DISK_GB", "total": MAX_INT, "allocation_ratio": 4194310.0}
    result = client.simulate_post(f"/resource_providers/{rp}/inventories", json=body)
    refused(result, "capacity of DISK_GB")
    body["allocation_ratio"] = 4194300.0
    result = client.simulate_post(f"/resource_providers/{rp}/inventories", json=body)
    assert result.status_code == 201, result.text
    capacity = MAX_INT * 4194300
    assert MAX_CAPACITY - 2**34 < capacity <= MAX_CAPACITY
    consumer = str(uuidlib.uuid4())
    held = claim(rp, MAX_INT, rc="DISK_GB")
    assert client.simulate_put(f"/allocations/{consumer}", json=held).status_code == 204
    found = client.simulate_get(
        "/allocation_candidates", query_string=f"resources=DISK_GB:{MAX_INT}"
    )
    assert found.status_code == 200, found.text
    summary = found.json["provider_summaries"][rp]["resources"]["DISK_GB"]
    assert summary == {"capacity": capacity, "used": MAX_INT}
    found = client.simulate_get("/resource_providers", query_string=f"resources=DISK_GB:{MAX_INT}")
    assert [p["uuid"] for p in found.json["resource_providers"]] == [rp]
    usages = client.simulate_get(f"/resource_providers/{rp}/usages").json["usages"]
    assert usages["DISK_GB"] == MAX_INT


# ---------------------------------------------------------------- uuids


def spellings(uuid: str) -> list[str]:
    return [uuid.upper(), uuid.replace("-", ""), uuid.replace("-", "").upper()]


def test_one_consumer_whatever_the_spelling(api, engine, rp):
    """POST /allocations kept an upper-case consumer as sent and PUT lower-cased
    it: one server became two consumers."""
    client = api()
    consumer = str(uuidlib.uuid4())
    upper, dashless, both = spellings(consumer)
    result = client.simulate_post("/allocations", json={upper: claim(rp.upper())})
    assert result.status_code == 204, result.text
    result = client.simulate_put(f"/allocations/{dashless}", json=claim(rp, 2, generation=1))
    assert result.status_code == 204, result.text
    held = client.simulate_get(f"/allocations/{both}").json
    assert {uuid: a["resources"] for uuid, a in held["allocations"].items()} == {rp: {"VCPU": 2}}
    assert held["consumer_generation"] == 2
    by_provider = client.simulate_get(f"/resource_providers/{rp.upper()}/allocations").json
    assert list(by_provider["allocations"]) == [consumer]
    with transaction(engine) as conn:
        assert conn.execute(sa.select(t.consumers.c.uuid)).scalars().all() == [consumer]
    assert client.simulate_delete(f"/allocations/{upper}").status_code == 204
    assert client.simulate_get(f"/allocations/{consumer}").json == {"allocations": {}}


def test_one_provider_whatever_the_spelling(api):
    client = api()
    parent = str(uuidlib.uuid4())
    result = client.simulate_post("/resource_providers", json={"name": "p", "uuid": parent.upper()})
    assert result.json["uuid"] == parent
    child = str(uuidlib.uuid4())
    body = {"name": "c", "uuid": child.replace("-", ""), "parent_provider_uuid": parent.upper()}
    result = client.simulate_post("/resource_providers", json=body)
    assert (result.json["uuid"], result.json["parent_provider_uuid"]) == (child, parent)
    for spelling in spellings(parent):
        assert client.simulate_get(f"/resource_providers/{spelling}").json["uuid"] == parent
        listed = client.simulate_get("/resource_providers", query_string=f"uuid={spelling}")
        assert [p["uuid"] for p in listed.json["resource_providers"]] == [parent]
        tree = client.simulate_get("/resource_providers", query_string=f"in_tree={spelling}")
        assert sorted(p["uuid"] for p in tree.json["resource_providers"]) == sorted([parent, child])
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    result = client.simulate_put(f"/resource_providers/{child.upper()}/inventories", json=inventory)
    assert result.status_code == 200, result.text
    found = client.simulate_get(
        "/allocation_candidates", query_string=f"resources=VCPU:1&in_tree={parent.upper()}"
    )
    assert [list(r["allocations"]) for r in found.json["allocation_requests"]] == [[child]]


def test_one_aggregate_whatever_the_spelling(api, rp):
    client = api()
    agg = str(uuidlib.uuid4())
    body = {"aggregates": [agg.upper()], "resource_provider_generation": 0}
    result = client.simulate_put(f"/resource_providers/{rp}/aggregates", json=body)
    assert result.json["aggregates"] == [agg], result.text
    for spelling in spellings(agg):
        found = client.simulate_get("/resource_providers", query_string=f"member_of={spelling}")
        assert [p["uuid"] for p in found.json["resource_providers"]] == [rp]
        found = client.simulate_get(
            "/allocation_candidates", query_string=f"resources=VCPU:1&member_of=in:{spelling}"
        )
        assert list(found.json["provider_summaries"]) == [rp]


def test_two_spellings_of_one_uuid_in_one_body_are_refused(api, engine, rp):
    client = api()
    before = rows(engine)
    consumer = str(uuidlib.uuid4())
    result = client.simulate_post(
        "/allocations", json={consumer: claim(rp), consumer.upper(): claim(rp)}
    )
    refused(result, f"names {consumer} twice")
    twice = claim(rp)
    twice["allocations"][rp.upper()] = {"resources": {"MEMORY_MB": 1}}
    result = client.simulate_put(f"/allocations/{consumer}", json=twice)
    refused(result, "['allocations']", f"names {rp} twice")
    agg = str(uuidlib.uuid4())
    body = {"aggregates": [agg, agg.upper()], "resource_provider_generation": 0}
    result = client.simulate_put(f"/resource_providers/{rp}/aggregates", json=body)
    refused(result, "['aggregates']", "same uuid twice")
    result = client.simulate_post("/allocations", json={"-" * 36: claim(rp)})
    refused(result, f"'{'-' * 36}', a key of the body, is not a 'uuid'")
    assert rows(engine) == before


def test_reshaper_takes_any_spelling(api, rp):
    client = api()
    consumer = str(uuidlib.uuid4())
    inventory = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 1024}}
    result = client.simulate_post(
        "/reshaper",
        json={
            "inventories": {
                rp.upper(): {"resource_provider_generation": 0, "inventories": inventory}
            },
            "allocations": {consumer.upper(): claim(rp.replace("-", "").upper())},
        },
    )
    # (a dashless provider key is refused by the key pattern, as upstream)
    refused(result, "JSON does not validate")
    result = client.simulate_post(
        "/reshaper",
        json={
            "inventories": {
                rp.upper(): {"resource_provider_generation": 0, "inventories": inventory}
            },
            "allocations": {consumer.upper(): claim(rp.upper())},
        },
    )
    assert result.status_code == 204, result.text
    held = client.simulate_get(f"/resource_providers/{rp}/allocations").json["allocations"]
    assert {c: a["resources"] for c, a in held.items()} == {consumer: {"VCPU": 1}}


@pytest.mark.parametrize("index_mb", [2048, 0], ids=["index", "database"])
def test_a_stored_inventory_past_the_bound_no_longer_breaks_candidates(api, engine, index_mb):
    """A row written before the bound existed (or imported by hand) breaks the ledger's
    rules: the candidates answer on every backend instead of "bigint out of range",
    leaving that inventory out (test_bad_stored_rows.py has the other kinds)."""
    huge = provider_with_inventory(engine, VCPU={"total": MAX_INT, "allocation_ratio": 5e9})
    sound = provider_with_inventory(engine, VCPU={"total": 8})
    client = api(candidates_index_max_mb=index_mb)
    found = client.simulate_get("/allocation_candidates", query_string="resources=VCPU:1")
    assert found.status_code == 200, found.text
    assert sound in found.json["provider_summaries"]
    assert huge not in found.json["provider_summaries"]
