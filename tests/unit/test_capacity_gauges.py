"""The items of `capacity_shapes`, and the setting read as a comma-separated list."""

from __future__ import annotations

import pytest

from tally.capacity_gauges import parse_shape
from tally.config import Settings
from tally.doctor.capacity import Shape


def test_items_are_flavors_or_classes_joined_by_plus():
    assert parse_shape("flavor:m1.small") == "m1.small"
    assert parse_shape(" flavor: m1.x+y ") == "m1.x+y"
    assert parse_shape("VCPU=4+MEMORY_MB=8192") == Shape({"VCPU": 4, "MEMORY_MB": 8192})
    assert parse_shape("CUSTOM_GPU = 1") == Shape({"CUSTOM_GPU": 1})


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("flavor:", "names no flavor"),
        ("VCPU", "'VCPU' is not CLASS=AMOUNT"),
        ("VCPU=0", "'VCPU=0' is not CLASS=AMOUNT"),
        ("VCPU=4+", "'' is not CLASS=AMOUNT"),
        ("VCPU:4", "is not CLASS=AMOUNT"),
        ("VCPU=1+VCPU=2", "VCPU is given twice"),
    ],
)
def test_bad_items_say_why(text, why):
    with pytest.raises(ValueError, match=why):
        parse_shape(text)


def test_the_setting_is_a_comma_separated_list():
    settings = Settings.of(capacity_shapes=" flavor:m1.small, VCPU=1+MEMORY_MB=512 ,")
    assert settings.capacity_shapes == ("flavor:m1.small", "VCPU=1+MEMORY_MB=512")
    assert Settings.of().capacity_shapes == ()
    assert Settings.of(capacity_shapes=["flavor:a,b"]).capacity_shapes == ("flavor:a,b",)
