"""The items of `capacity_shapes`, and the setting read as a comma-separated list."""

from __future__ import annotations

import pytest

from tally.config import Settings
from tally.doctor.fill import Shape
from tally.serve.fill_gauges import parse_item


def test_items_are_flavors_or_classes_joined_by_plus():
    assert parse_item("flavor:m1.small") == "m1.small"
    assert parse_item(" flavor: m1.x+y ") == "m1.x+y"
    assert parse_item("VCPU=4+MEMORY_MB=8192") == Shape({"VCPU": 4, "MEMORY_MB": 8192})
    assert parse_item("CUSTOM_GPU = 1") == Shape({"CUSTOM_GPU": 1})
    assert parse_item("VCPU:4+MEMORY_MB=8192") == Shape({"VCPU": 4, "MEMORY_MB": 8192})


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("flavor:", "names no flavor"),
        ("VCPU", "'VCPU' is not CLASS=N or CLASS:N"),
        ("VCPU=0", "'VCPU=0': the amount must be at least 1"),
        ("VCPU=4+", "has an empty piece \\(a '\\+' with nothing after\\)"),
        ("VCPU=1+VCPU=2", "'VCPU=2': VCPU is given twice"),
    ],
)
def test_bad_items_say_why(text, why):
    with pytest.raises(ValueError, match=why):
        parse_item(text)


def test_the_setting_is_a_comma_separated_list():
    settings = Settings.of(capacity_shapes=" flavor:m1.small, VCPU=1+MEMORY_MB=512 ,")
    assert settings.capacity_shapes == ("flavor:m1.small", "VCPU=1+MEMORY_MB=512")
    assert Settings.of().capacity_shapes == ()
    assert Settings.of(capacity_shapes=["flavor:a,b"]).capacity_shapes == ("flavor:a,b",)
