"""`/metrics` of a real `tally serve --workers 2`: each worker counts in the run's own
directory (prometheus_client's multiprocess mode), so any worker's answer adds up
every worker's requests; admins only."""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.live import tally_serve

pytestmark = pytest.mark.slow

ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def value(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        metric, _, number = line.rpartition(" ")
        if metric.startswith(name + "{") or metric == name:
            got = ",".join(sorted(metric[len(name) + 1 : -1].split(","))) if "{" in metric else ""
            if got == want:
                return float(number)
    return 0.0


def test_counts_add_up_across_two_workers(tmp_path: Path):
    with tally_serve(tmp_path, workers="2", lab="off") as url:
        log = (tmp_path / "serve.log").read_text()
        directory = re.search(r"metrics of the workers in (\S+)", log).group(1)
        rp = str(uuid.uuid4())
        assert (
            httpx.post(
                f"{url}/resource_providers", headers=ADMIN, json={"name": "cn1", "uuid": rp}
            ).status_code
            == 200
        )
        inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
        assert (
            httpx.put(
                f"{url}/resource_providers/{rp}/inventories", headers=ADMIN, json=inventory
            ).status_code
            == 200
        )
        claim = {
            "allocations": {rp: {"resources": {"VCPU": 3}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        assert (
            httpx.put(f"{url}/allocations/{uuid.uuid4()}", headers=ADMIN, json=claim).status_code
            == 204
        )
        assert (
            httpx.put(f"{url}/allocations/{uuid.uuid4()}", headers=ADMIN, json=claim).status_code
            == 409
        )
        stale = {**claim, "consumer_generation": 7}
        assert (
            httpx.put(f"{url}/allocations/{uuid.uuid4()}", headers=ADMIN, json=stale).status_code
            == 409
        )
        shrink = {"resource_provider_generation": 2, "inventories": {"VCPU": {"total": 2}}}
        refused = httpx.put(
            f"{url}/resource_providers/{rp}/inventories", headers=ADMIN, json=shrink
        )
        assert refused.status_code == 409 and "inventory.inuse" in refused.text

        def get(_: int) -> int:  # a new connection each: the workers share them out
            return httpx.get(f"{url}/resource_providers", headers=ADMIN).status_code

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(get, range(60))) == {200}
        assert len(list(Path(directory).glob("counter_*.db"))) >= 2  # both workers counted

        assert httpx.get(f"{url}/metrics").status_code == 401  # no token: who is it?
        assert httpx.get(f"{url}/metrics", headers={"x-auth-token": "alice"}).status_code == 403
        for _ in range(4):  # whichever worker answers, the same sums
            text = httpx.get(f"{url}/metrics", headers=ADMIN).text
            assert (
                value(
                    text,
                    "tally_http_requests_total",
                    route="/resource_providers",
                    method="GET",
                    status="200",
                )
                == 60
            )
            assert (
                value(
                    text,
                    "tally_http_request_duration_seconds_count",
                    route="/resource_providers",
                    method="GET",
                )
                == 60
            )
            assert value(text, "tally_claims_total", outcome="accepted") == 1
            assert value(text, "tally_claims_total", outcome="refused_capacity") == 1
            assert value(text, "tally_claims_total", outcome="refused_generation") == 1
            assert value(text, "tally_capacity_guard_refusals_total", resource_class="VCPU") == 1
            assert value(text, "tally_provider_capacity", provider=rp, resource_class="VCPU") == 4
            assert value(text, "tally_provider_used", provider=rp, resource_class="VCPU") == 3
            assert value(text, "tally_provider_reserved", provider=rp, resource_class="VCPU") == 0
    assert not Path(directory).exists()  # removed when the server stopped
