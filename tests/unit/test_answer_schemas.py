"""Answers built from the schema rows' answer schemas (`schemas.answer_schemas.fitter`): a handler
writes the newest fields, the schema of the request's microversion keeps its own."""

from __future__ import annotations

from tally.placement.schemas import allocations, providers
from tally.placement.schemas.answer_schemas import INT, STR, array, fitter, mapping, obj


def test_an_object_keeps_the_fields_its_schema_lists_in_the_body_order():
    fit = fitter(obj(a=INT, b=STR))
    assert list(fit({"b": "x", "z": 1, "a": 2})) == ["b", "a"]


def test_maps_and_arrays_are_fitted_value_by_value():
    fit = fitter(obj(held=mapping(obj(n=INT)), items=array(obj(k=STR))))
    body = {"held": {"p": {"n": 1, "gone": 2}}, "items": [{"k": "v", "gone": 3}]}
    assert fit(body) == {"held": {"p": {"n": 1}}, "items": [{"k": "v"}]}


def test_a_schema_without_objects_gives_the_body_itself():
    body = {"a": 1}
    assert fitter(mapping(INT))(body) is body
    assert fitter(None)(body) is body


def test_a_provider_shows_its_tree_from_1_14():
    body = {"uuid": "u", "name": "n", "generation": 0, "links": [], "parent_provider_uuid": None}
    body["root_provider_uuid"] = "u"
    assert "root_provider_uuid" not in fitter(providers.provider((1, 13)))(body)
    assert fitter(providers.provider((1, 14)))(body) == body


def test_a_provider_allocation_shows_its_consumer_generation_from_1_28():
    body = {"allocations": {"c": {"resources": {"VCPU": 1}, "consumer_generation": 3}}}
    body["resource_provider_generation"] = 5
    old = fitter(allocations.provider_allocations((1, 27)))(body)
    assert old["allocations"] == {"c": {"resources": {"VCPU": 1}}}
    assert fitter(allocations.provider_allocations((1, 28)))(body) == body
