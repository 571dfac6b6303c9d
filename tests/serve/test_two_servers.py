"""Two real `tally serve` processes (two workers each) on one database: each worker
keeps its own candidates index, and a write through any of them shows in every
other's very next answer (the ledger journal keeps them coherent), on each
backend the suite runs."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.live import tally_serve

pytestmark = pytest.mark.slow

ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def _candidates(url: str, resources: str) -> dict:
    resp = httpx.get(f"{url}/allocation_candidates?resources={resources}", headers=ADMIN)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_claims_and_deletes_through_one_server_show_in_the_other(engine: sa.Engine, tmp_path: Path):
    url = engine.url.render_as_string(hide_password=False)
    if engine.dialect.name == "sqlite":
        url = f"sqlite:///{engine.url.database}"
    settings = {"database_url": url, "workers": "2", "lab": "off"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        tally_serve(tmp_path / "a", **settings) as one,
        tally_serve(tmp_path / "b", **settings) as other,
    ):
        providers = [str(uuid.uuid4()) for _ in range(3)]
        for i, rp in enumerate(providers):
            body = {"name": f"cn{i}", "uuid": rp}
            assert httpx.post(f"{one}/resource_providers", headers=ADMIN, json=body).is_success
            inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
            resp = httpx.put(
                f"{one}/resource_providers/{rp}/inventories", headers=ADMIN, json=inventory
            )
            assert resp.status_code == 200, resp.text
        # each request may land on either worker of a server: ask each several times
        for _ in range(4):
            assert set(_candidates(other, "VCPU:1")["provider_summaries"]) == set(providers)

        for step in range(4):  # claims alternate between the servers
            via, seen_by = (one, other) if step % 2 == 0 else (other, one)
            claim = {
                "allocations": {providers[0]: {"resources": {"VCPU": 1}}},
                "consumer_generation": None,
                "project_id": "p",
                "user_id": "u",
                "consumer_type": "INSTANCE",
            }
            resp = httpx.put(f"{via}/allocations/{uuid.uuid4()}", headers=ADMIN, json=claim)
            assert resp.status_code == 204, resp.text
            for _ in range(3):
                summary = _candidates(seen_by, "VCPU:1")["provider_summaries"]
                used = summary.get(providers[0], {}).get("resources", {}).get("VCPU", {})
                assert used.get("used", 4) == step + 1  # full at 4: then it is not offered
        assert providers[0] not in _candidates(one, "VCPU:1")["provider_summaries"]

        gone = httpx.delete(f"{other}/resource_providers/{providers[1]}", headers=ADMIN)
        assert gone.status_code == 204, gone.text
        for _ in range(4):
            for url_ in (one, other):
                assert providers[1] not in _candidates(url_, "VCPU:1")["provider_summaries"]
