"""`capacity_shapes = flavor:NAME` with the lab on: the flavor's shape is read from
the lab compute in-process, and `/metrics` counts it as `tally capacity --flavor`.

    cmp-1  4 VCPU, 8 GiB, 100 GB      cmp-2  8 VCPU, 4 GiB, 60 GB
    m1.cap: 2 VCPU, 1 GiB, 17 GB -> cmp-1 5, cmp-2 3 (see test_capacity_flavor.py)
"""

from __future__ import annotations

import logging

from prometheus_client.parser import text_string_to_metric_families

from tally.doctor.fill import flavor_shape, read_capacity

ADMIN = {"x-auth-token": "admin"}


def gauges(lab) -> dict:
    answer = lab.http.get("/metrics", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return {
        (s.name, s.labels.get("name", "")): s.value
        for family in text_string_to_metric_families(answer.text)
        if family.name.startswith("tally_capacity_fits")
        for s in family.samples
        if s.labels["shape"] == "flavor:m1.cap"
    }


def test_a_flavor_shape_is_counted_through_the_lab_compute(make_lab, caplog):
    lab = make_lab(capacity_shapes="flavor:m1.cap,flavor:nope", capacity_cache_seconds=0)
    lab.hosts("cmp-1", vcpus=4, memory_mb=8192, disk_gb=100)
    lab.hosts("cmp-2", vcpus=8, memory_mb=4096, disk_gb=60)
    with caplog.at_level(logging.WARNING, logger="tally.metrics"):
        assert gauges(lab) == {}  # no such flavor yet: skipped, logged
        lab.flavor(
            "m1.cap", vcpus=2, ram=1024, disk=10, **{"OS-FLV-EXT-DATA:ephemeral": 5, "swap": 1536}
        )
        found = gauges(lab)
    report = read_capacity(lab.placement, flavor_shape(lab.compute, "m1.cap"))
    assert found == {
        ("tally_capacity_fits", ""): report.total,
        **{("tally_capacity_fits_provider", r.provider): r.fits for r in report.rows},
    }
    assert found == {
        ("tally_capacity_fits", ""): 8,
        ("tally_capacity_fits_provider", "cmp-1"): 5,
        ("tally_capacity_fits_provider", "cmp-2"): 3,
    }
    skipped = [r.getMessage() for r in caplog.records if "is skipped" in r.getMessage()]
    assert skipped == [
        "capacity_shapes: 'flavor:m1.cap' is skipped: no flavor named 'm1.cap' in the compute API",
        "capacity_shapes: 'flavor:nope' is skipped: no flavor named 'nope' in the compute API",
    ]

    lab.boot("vm-1", "m1.cap")
    assert gauges(lab)["tally_capacity_fits", ""] == 7


def test_flavors_resolve_under_lab_tokens_too(make_lab):
    """With `auth_strategy = lab` the in-process compute client still reads flavors
    (it speaks as an admin behind the token filter); /metrics wants a lab token.
    cmp-1 fits 7 (7680 MB of memory not reserved // 1024)."""
    from tests.lab.test_identity import USERS, token

    lab = make_lab(lab_users=USERS, auth_strategy="lab", capacity_shapes="flavor:m1.cap")
    admin = token(lab)
    lab.compute = lab.compute_as(admin)
    lab.hosts("cmp-1", vcpus=4, memory_mb=8192, disk_gb=100)
    lab.flavor("m1.cap", vcpus=2, ram=1024, disk=10)
    assert lab.http.get("/metrics", headers=ADMIN).status_code == 401  # not a lab token
    answer = lab.http.get("/metrics", headers={"x-auth-token": admin})
    assert answer.status_code == 200
    assert 'tally_capacity_fits{shape="flavor:m1.cap"} 7.0' in answer.text
