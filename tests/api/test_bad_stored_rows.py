"""A row the API would never have let in (written by hand, or by an older tool)
never turns into a 500 for every caller: the candidate search, the provider
listings and claims on sound providers answer as before, the bad provider is left
out of candidates, and the log names it once per load."""

from __future__ import annotations

import logging
import uuid

import pytest
import sqlalchemy as sa

from tally.db import schema as t
from tests.api.test_candidates import Cloud, get

# what is done to the `bad` provider's stored rows, behind the API's back
CORRUPTIONS = {
    "ratio 1e308": ("inventories", {"allocation_ratio": 1e308}),
    "ratio 0": ("inventories", {"allocation_ratio": 0.0}),
    "step 0": ("inventories", {"step_size": 0}),
    "min above max": ("inventories", {"min_unit": 9, "max_unit": 2}),
    "negative total": ("inventories", {"total": -5}),
    "unknown class": ("inventories", {"resource_class_id": 987654}),
    "dangling parent": ("resource_providers", {"parent_provider_id": 987654}),
    "dangling root": ("resource_providers", {"root_provider_id": 987654}),
}


@pytest.fixture(params=[2048, 0], ids=["index", "database"])
def index_mb(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_bad_row_is_left_out_not_a_500(api, engine, index_mb, corruption, caplog):
    cloud = Cloud(api())
    cloud.provider("good", inventory={"VCPU": 8})
    cloud.provider("bad", inventory={"VCPU": 8})
    table, values = CORRUPTIONS[corruption]
    if corruption == "ratio 1e308" and engine.dialect.name == "mysql":
        values = {
            "allocation_ratio": 3e38
        }  # MySQL's FLOAT holds no more; past the bound all the same
    with engine.begin() as conn:
        bad_id = conn.execute(
            sa.select(t.resource_providers.c.id).where(
                t.resource_providers.c.uuid == cloud.uuids["bad"]
            )
        ).scalar_one()
        column = "id" if table == "resource_providers" else "resource_provider_id"
        tab = getattr(t, table)
        conn.execute(sa.update(tab).where(tab.c[column] == bad_id).values(**values))
    client = api(candidates_index_max_mb=index_mb)
    caplog.set_level(logging.WARNING)
    body = get(client, "resources=VCPU:1")
    providers = {u for r in body["allocation_requests"] for u in r["allocations"]}
    assert cloud.uuids["good"] in providers
    assert cloud.uuids["bad"] not in providers
    if index_mb:  # the index loads every row: it says which it left out
        said = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
        assert said and cloud.uuids["bad"] in said[0] or str(bad_id) in said[0], said
    listed = client.simulate_get("/resource_providers", query_string="resources=VCPU:1")
    assert listed.status_code == 200, listed.text
    assert cloud.uuids["good"] in {p["uuid"] for p in listed.json["resource_providers"]}
    everything = client.simulate_get("/resource_providers")
    assert everything.status_code == 200, everything.text
    # a listing shows every stored provider, the one left out of candidates too
    # (the index, missing it, leaves such a listing to the database)
    listed_all = {p["uuid"] for p in everything.json["resource_providers"]}
    assert listed_all == {cloud.uuids["good"], cloud.uuids["bad"]}
    claim = {
        "allocations": {cloud.uuids["good"]: {"resources": {"VCPU": 2}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    done = client.simulate_put(f"/allocations/{uuid.uuid4()}", json=claim)
    assert done.status_code == 204, done.text
    usage = client.simulate_get(f"/resource_providers/{cloud.uuids['good']}/usages")
    assert usage.json["usages"] == {"VCPU": 2}
    claim["allocations"] = {cloud.uuids["bad"]: {"resources": {"VCPU": 2}}}
    on_bad = client.simulate_put(f"/allocations/{uuid.uuid4()}", json=claim)
    assert on_bad.status_code in (204, 409), on_bad.text  # refused or fine, never a 500
