"""A whole candidates answer leaves as its pieces (`render.Answer`), joined a chunk
at a time as the server sends it: its stated length is the length sent, the
chunks join to the JSON the answer is, and through `tally serve`'s server the
body arrives whole, as JSON, with its Content-Length (from the index and from the
database alike)."""

from __future__ import annotations

import json
import logging

import httpx
import orjson
import pytest
import sqlalchemy as sa

from tally.config import Settings
from tally.db import schema as t
from tally.placement.app import create_app
from tally.placement.ledger.candidates import render
from tally.placement.ledger.common import utcnow
from tests.live import serving_thread

HEADERS = {
    "x-auth-token": "admin",
    "openstack-api-version": "placement 1.39",
}


def summary(n: int) -> bytes:
    return b'"%08d-0000-0000-0000-000000000000":{"resources":{"VCPU":{"capacity":%d,"used":0}}}' % (
        n,
        n,
    )


@pytest.mark.parametrize("count", [0, 1, 999, 1000, 1001, 2500])
def test_the_chunks_join_to_the_answer_and_its_length(count):
    requests = b",".join(b'{"allocations":{},"mappings":{"":["%d"]}}' % n for n in range(count))
    answer = render.Answer(requests, [summary(n) for n in range(count)])
    chunks = list(answer.chunks())
    joined = b"".join(chunks)
    assert len(answer) == len(joined) == len(bytes(answer))
    parsed = json.loads(joined)
    assert len(parsed["allocation_requests"]) == count
    assert sorted(parsed["provider_summaries"]) == [
        f"{n:08d}-0000-0000-0000-000000000000" for n in range(count)
    ]
    assert len(chunks) == 2 + -(-count // render.SUMMARIES_A_CHUNK)  # head, groups, tail


def test_summaries_already_joined_by_commas_are_one_piece():
    answer = render.Answer(b"", [summary(1) + b"," + summary(2)])
    assert len(json.loads(bytes(answer))["provider_summaries"]) == 2
    assert len(answer) == len(bytes(answer))


def add_hosts(engine: sa.Engine, count: int) -> None:
    """`count` root providers with 4 VCPU each, written straight in."""
    now = utcnow()
    with engine.begin() as conn:
        vcpu = conn.execute(
            sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == "VCPU")
        ).scalar_one()
        conn.execute(
            t.resource_providers.insert(),
            [
                {"uuid": f"{n:08d}-1111-2222-3333-444444444444", "name": f"h{n}", "generation": 1}
                for n in range(count)
            ],
        )
        conn.execute(
            t.resource_providers.update().values(root_provider_id=t.resource_providers.c.id)
        )
        ids = conn.execute(sa.select(t.resource_providers.c.id)).scalars().all()
        conn.execute(
            t.inventories.insert(),
            [
                {
                    "resource_provider_id": rp,
                    "resource_class_id": vcpu,
                    "total": 4,
                    "reserved": 0,
                    "min_unit": 1,
                    "max_unit": 4,
                    "step_size": 1,
                    "allocation_ratio": 1.0,
                    "created_at": now,
                }
                for rp in ids
            ],
        )


@pytest.mark.parametrize("index_mb", [0, 1024], ids=["database", "index"])
@pytest.mark.slow
def test_a_whole_answer_through_the_server(engine, index_mb, caplog):
    hosts = 2 * render.SUMMARIES_A_CHUNK + 1
    add_hosts(engine, hosts)
    app = create_app(Settings.of(candidates_index_max_mb=index_mb), engine)
    caplog.set_level(logging.INFO, logger="tally.requestlog")
    with serving_thread(app) as (url, _server):
        with httpx.stream(
            "GET", f"{url}/allocation_candidates?resources=VCPU:1", headers=HEADERS
        ) as answer:
            body = b"".join(answer.iter_raw())
        assert answer.status_code == 200, body[:300]
        assert int(answer.headers["content-length"]) == len(body)
        assert answer.headers["content-type"] == "application/json"
        logged = [r.getMessage() for r in caplog.records if r.name == "tally.requestlog"]
        assert len(logged) == 1 and f"status: 200 len: {len(body)} " in logged[0], logged
        found = orjson.loads(body)
        assert len(found["allocation_requests"]) == hosts
        assert len(found["provider_summaries"]) == hosts
        limited = httpx.get(
            f"{url}/allocation_candidates?resources=VCPU:1&limit=3", headers=HEADERS
        )
        assert len(limited.json()["allocation_requests"]) == 3
        assert int(limited.headers["content-length"]) == len(limited.content)
