"""Names end where they seem to (issue 37, item 7): `CUSTOM_X\\n` was a resource class
(and a trait, a consumer type) because the name patterns ended in `$`, which in Python's
`re` (and so in jsonschema) also matches before a final newline. Every door that takes
a name refuses one with a newline (or anything else) after it, with a 400 naming the
field, and writes nothing; the rules are one module's (`tally.names`), which the
importer uses too.

    rp    (VCPU 8)      holds nothing
"""

from __future__ import annotations

import uuid as uuidlib

import pytest

from tally import names
from tests.api.test_input_domain import JSON, claim, refused, rows
from tests.builders import provider_with_inventory

TAILS = ["\n", "\r\n", "\n\n", " ", "\t", "\x0b", "\u2028", "\n" + "X"]


@pytest.fixture
def rp(engine) -> str:
    return provider_with_inventory(engine, VCPU=8)


@pytest.mark.parametrize("tail", TAILS, ids=repr)
def test_the_name_rules_end_at_the_end(tail):
    for ok in ("CUSTOM_X", "VCPU", "INSTANCE"):
        assert not names.is_resource_class_name(ok + tail)
        assert not names.is_trait_name(ok + tail)
        assert not names.is_consumer_type(ok + tail)
    assert not names.is_custom_resource_class_name("CUSTOM_X" + tail)
    assert not names.is_custom_trait_name("CUSTOM_X" + tail)


def test_the_name_rules():
    assert names.is_resource_class_name("VCPU") and names.is_resource_class_name("CUSTOM_X")
    assert names.is_custom_resource_class_name("CUSTOM_X")
    assert not names.is_custom_resource_class_name("VCPU")
    assert names.is_trait_name("HW_CPU_X86_AVX2") and names.is_custom_trait_name("CUSTOM_T")
    assert names.is_consumer_type("INSTANCE")
    for bad in ("", "custom_x", "CUSTOM_", "CUSTOM-X", "X" * 256, None, 5, b"VCPU"):
        assert not names.is_custom_resource_class_name(bad)
        assert not names.is_custom_trait_name(bad)
    for bad in ("", "vcpu", "V CPU", "X" * 256, None):
        assert not names.is_resource_class_name(bad)
        assert not names.is_trait_name(bad)
        assert not names.is_consumer_type(bad)
    assert names.is_resource_class_name("X" * 255)


@pytest.mark.parametrize(
    ("name", "fault"),
    [
        ("VCPU", None),
        ("CUSTOM_X", None),
        ("CUSTOM_X\n", "not CUSTOM_ and then A-Z, 0-9 and _"),
        ("CUSTOM_", "not CUSTOM_ and then A-Z, 0-9 and _"),
        ("VCPU\n", "not A-Z, 0-9 and _"),
        ("vcpu", "not A-Z, 0-9 and _"),
        ("", "not 1 to 255 characters"),
        ("X" * 256, "not 1 to 255 characters"),
        (None, "not 1 to 255 characters"),
    ],
)
def test_why_a_name_is_never_the_apis(name, fault):
    """The importer's question (`tally db import`): the API's rule, in words."""
    assert names.name_fault(name) == fault


@pytest.mark.parametrize("tail", ["\n", "\r\n", " "], ids=repr)
@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/resource_classes", {"name": "CUSTOM_X{tail}"}, "'name'"),
        ("PUT", "/resource_classes/CUSTOM_X{tail}", None, "CUSTOM_X"),
        ("PUT", "/traits/CUSTOM_T{tail}", None, "The trait is invalid"),  # upstream's words
        (
            "POST",
            "/resource_providers/{rp}/inventories",
            {"resource_class": "CUSTOM_X{tail}", "total": 1},
            "'resource_class'",
        ),
        (
            "PUT",
            "/resource_providers/{rp}/inventories",
            {"resource_provider_generation": 0, "inventories": {"VCPU{tail}": {"total": 1}}},
            "VCPU",
        ),
        ("PUT", "/allocations/{consumer}", "claim:VCPU{tail}", "VCPU"),
        ("PUT", "/allocations/{consumer}", "consumer_type:INSTANCE{tail}", "'consumer_type'"),
    ],
)
def test_a_name_with_a_tail_is_refused_naming_the_field(
    api, engine, rp, tail, method, path, body, field
):
    client = api("1.39")
    consumer = str(uuidlib.uuid4())
    if isinstance(body, str):
        kind, _, value = body.partition(":")
        value = value.format(tail=tail)
        body = claim(rp, rc=value) if kind == "claim" else {**claim(rp), "consumer_type": value}
    elif body is not None:
        body = _format(body, tail)
    target = path.format(tail=_quoted(tail), rp=rp, consumer=consumer)
    before = rows(engine)
    result = client.simulate_request(method, target, json=body)
    refused(result, field)
    assert rows(engine) == before


def _format(value, tail: str):  # noqa: ANN001, ANN202
    if isinstance(value, dict):
        return {_format(k, tail): _format(v, tail) for k, v in value.items()}
    return value.format(tail=tail) if isinstance(value, str) else value


def _quoted(tail: str) -> str:
    from urllib.parse import quote

    return quote(tail, safe="")


@pytest.mark.parametrize("query", ["consumer_type=INSTANCE%0A", "consumer_type=all%0A"])
def test_a_usages_consumer_type_with_a_tail_is_refused(api, query):
    result = api("1.39").simulate_get(f"/usages?project_id=p&{query}")
    refused(result, "consumer_type")


@pytest.mark.parametrize("query", ["resources%0A=VCPU:1", "resources1%0A=VCPU:1&group_policy=none"])
def test_a_candidates_key_with_a_tail_is_refused(api, rp, query):
    result = api("1.39").simulate_get(f"/allocation_candidates?{query}")
    refused(result, "resources")


@pytest.mark.parametrize("query", ["limit=1%0A", "limit=5%0A&resources=VCPU:1"])
def test_a_candidates_limit_with_a_tail_is_refused(api, rp, query):
    result = api("1.39").simulate_get(f"/allocation_candidates?resources=VCPU:1&{query}")
    refused(result, "limit")


def test_a_custom_class_without_a_tail_is_still_created(api):
    client = api("1.39")
    created = client.simulate_put("/resource_classes/CUSTOM_X")
    assert created.status_code == 201, created.text
    assert client.simulate_put("/traits/CUSTOM_T").status_code == 201
    posted = client.simulate_post("/resource_classes", json={"name": "CUSTOM_Y"}, headers=JSON)
    assert posted.status_code == 201, posted.text
