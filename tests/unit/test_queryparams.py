"""The grammar of the provider-filter query parameters, per microversion."""

from __future__ import annotations

import pytest

from tally.placement import queryparams as qp
from tally.placement.error_types import BadRequest

A = "83a3d69d-8920-48e2-8914-cadfd8fa2f91"
B = "99652f11-9f77-46b9-80b7-4b1989be9f8c"
C = "282d469e-29e2-4a8a-8f2e-31b3202b696a"


def fails(call, *args, **kwargs) -> str:
    with pytest.raises(BadRequest) as caught:
        call(*args, **kwargs)
    return caught.value.detail


# --- resources ------------------------------------------------------------------


def test_resources_parse_to_amounts():
    assert qp.parse_resources("VCPU:2,MEMORY_MB:1024") == {"VCPU": 2, "MEMORY_MB": 1024}
    assert qp.parse_resources("VCPU:1,VCPU:3") == {"VCPU": 3}  # the last amount wins


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "Got: empty string."),
        ("  ", "Got: empty string."),
        ("VCPU", "Expected resources query string parameter in form: "),
        ("VCPU:1:2", "Got: VCPU:1:2."),
        ("VCPU:1,", "Got: ."),
        ("VCPU:fred", "Requested resource VCPU expected positive integer amount. Got: fred."),
        ("VCPU:0", "Requested resource VCPU requires amount >= 1. Got: 0."),
        ("VCPU:-2", "requires amount >= 1. Got: -2."),
    ],
)
def test_bad_resources(value, words):
    detail = fails(qp.parse_resources, value)
    assert words in detail
    if "form" in words or "Got: ." in words:
        assert detail.startswith("Badly formed resources parameter.")


# --- required ------------------------------------------------------------------


def test_required_plain_names_each_form_a_set():
    traits = qp.parse_required(["A,B"], (1, 18))
    assert traits.required == [frozenset({"A"}), frozenset({"B"})]
    assert traits.forbidden == frozenset()
    assert traits.names() == {"A", "B"}


def test_forbidden_traits_from_1_22():
    traits = qp.parse_required(["A,!B, !!C"], (1, 22))
    assert traits.required == [frozenset({"A"})]
    assert traits.forbidden == frozenset({"B", "C"})
    detail = fails(qp.parse_required, ["A,!B"], (1, 21))
    assert detail.endswith("form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: A,!B")


@pytest.mark.parametrize(
    ("version", "value", "form"),
    [
        ((1, 21), "", "HW_CPU_X86_VMX,CUSTOM_MAGIC"),
        ((1, 22), "", "HW_CPU_X86_VMX,!CUSTOM_MAGIC"),
        ((1, 22), "A,,B", "HW_CPU_X86_VMX,!CUSTOM_MAGIC"),
        ((1, 22), "A,!", "HW_CPU_X86_VMX,!CUSTOM_MAGIC"),
    ],
)
def test_empty_trait_names(version, value, form):
    detail = fails(qp.parse_required, [value], version)
    assert detail == (
        "Invalid query string parameters: Expected 'required' parameter value of the "
        f"form: {form}. Got an empty trait in: {value}"
    )


def test_any_of_traits_and_repeats_from_1_39():
    traits = qp.parse_required(["in:A, B", "C,!D", "in:E"], (1, 39))
    assert traits.required == [frozenset({"A", "B"}), frozenset({"C"}), frozenset({"E"})]
    assert traits.forbidden == frozenset({"D"})


def test_before_1_39_a_repeated_required_keeps_the_last():
    assert qp.parse_required(["A", "B"], (1, 38)).required == [frozenset({"B"})]
    detail = fails(qp.parse_required, ["in:A,B"], (1, 38))
    assert "only supported since microversion 1.39. Got: in:A,B" in detail


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("in:A,!B", "does not support forbidden traits. Got: in:A,!B"),
        ("in:A,,B", "form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: in:A,,B"),
        ("in:", "Got an empty trait in: in:"),
    ],
)
def test_bad_any_of_traits(value, words):
    assert words in fails(qp.parse_required, [value], (1, 39))


def test_no_required_is_an_empty_filter():
    assert not qp.parse_required([], (1, 39))
    assert not qp.parse_required([], (1, 18))


def test_flat_traits_and_conflicts():
    assert qp.parse_flat_traits("A,!B") == ({"A"}, {"B"})
    assert "only supported since" in fails(qp.parse_flat_traits, "in:A")
    traits = qp.parse_required(["in:A,B", "C", "!A,!C"], (1, 39))
    assert qp.conflicting_traits(traits) == [frozenset({"C"})]
    both = qp.parse_required(["in:A,B", "!A,!B"], (1, 39))
    assert qp.conflicting_traits(both) == [frozenset({"A", "B"})]


# --- member_of -----------------------------------------------------------------


def test_member_of_forms():
    assert qp.parse_member_of([A], (1, 3)).required == [frozenset({A})]
    assert qp.parse_member_of([f"in:{A},{B}"], (1, 3)).required == [frozenset({A, B})]
    repeated = qp.parse_member_of([A, f"in:{B},{C}"], (1, 24))
    assert repeated.required == [frozenset({A}), frozenset({B, C})]
    forbidden = qp.parse_member_of([f"!{A}", f"!in:{B},{C}", A], (1, 32))
    assert forbidden.required == [frozenset({A})]
    assert forbidden.forbidden == frozenset({A, B, C})
    assert not qp.parse_member_of([], (1, 39))


@pytest.mark.parametrize(
    ("values", "version", "words"),
    [
        ([A, B], (1, 23), "Multiple member_of parameters are not supported"),
        ([f"!{A}"], (1, 31), "Forbidden member_of parameters are not supported"),
        ([f"!in:{A},{B}"], (1, 31), "in the specified microversion"),
        (["not a uuid"], (1, 39), "to contain valid UUID(s). Got: not a uuid"),
        (["!(^o^)"], (1, 32), "Expected 'member_of' parameter to contain valid UUID(s)"),
        ([f"in:{A},!{B}"], (1, 32), f"valid UUID(s). Got: !{B}"),
        ([f"{A},{B}"], (1, 39), "must be prefixed with the 'in:' or '!in:' keyword"),
        (["in:"], (1, 39), "valid UUID(s). Got: "),
    ],
)
def test_bad_member_of(values, version, words):
    assert words in fails(qp.parse_member_of, values, version)


def test_member_of_messages_name_the_suffix():
    assert "member_of1 parameters" in fails(qp.parse_member_of, [A, B], (1, 23), "1")


# --- in_tree -------------------------------------------------------------------


def test_in_tree():
    assert qp.parse_in_tree(f" {A} ") == A
    assert qp.parse_in_tree(A.replace("-", "").upper()) == A  # canonical form
    detail = fails(qp.parse_in_tree, "nope")
    assert detail == (
        "Invalid query string parameters: Expected 'in_tree' parameter to be a format "
        "of uuid. Got: nope"
    )
