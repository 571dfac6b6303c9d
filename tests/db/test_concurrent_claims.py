"""Concurrent claims never oversubscribe and never lose an acknowledged write.

Several processes (each with its own engine and app, as `tally serve` workers
have) claim at the same moment, on SQLite and on PostgreSQL. The workers walk
through the same phases in step, so every small provider is filled by all of
them racing at its capacity boundary:

    small[0..3] (VCPU 6 each)                      big (VCPU 1000)
    phase k: claims on small[k] alone, and on       every worker races to
    small[k] + small[k+1] in either body order      create the same consumers

Afterwards: usage <= capacity everywhere, the allocations in the database are
exactly those of the 2xx answers, every refusal is a 409 that the final state
explains, and each contested new consumer was created by exactly one worker.
"""

from __future__ import annotations

import multiprocessing
import uuid

import falcon.testing
import sqlalchemy as sa

from tally.config import Settings
from tally.db import schema as t
from tally.db.engine import make_engine
from tally.db.transaction import transaction
from tally.placement.app import create_app
from tests.builders import provider_with_inventory

WORKERS = 6
SMALL = 4
CLAIMS_PER_PHASE = 3
CONTESTED = 3


def _claim_body(allocations: dict[str, int]) -> dict:
    return {
        "allocations": {rp: {"resources": {"VCPU": n}} for rp, n in allocations.items()},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
    }


def _worker(url: str, plan: list[tuple[str, dict[str, int]]], barrier, results) -> None:
    """Run `plan` (consumer uuid, {provider: VCPU}) against a private app."""
    engine = make_engine(url)
    client = falcon.testing.TestClient(
        create_app(Settings.of(), engine),
        headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.28"},
    )
    answers = []
    try:
        barrier.wait(timeout=60)
        for consumer, allocations in plan:
            result = client.simulate_put(f"/allocations/{consumer}", json=_claim_body(allocations))
            error = result.json["errors"][0] if result.status_code >= 400 else {}
            answers.append((consumer, allocations, result.status_code, error.get("detail", "")))
    finally:
        results.put(answers)
        engine.dispose()


def _plans(small: list[str], big: str) -> list[list[tuple[str, dict[str, int]]]]:
    contested = [str(uuid.uuid4()) for _ in range(CONTESTED)]
    plans = []
    for w in range(WORKERS):
        plan = []
        for k, rp in enumerate(small):
            after = small[(k + 1) % SMALL]
            for i in range(CLAIMS_PER_PHASE):
                if i == 0:
                    allocations = {rp: 1}
                elif (w + i) % 2:
                    allocations = {rp: 1, after: 1}
                else:
                    allocations = {after: 1, rp: 1}
                plan.append((str(uuid.uuid4()), allocations))
        at = w % len(plan)
        plan[at:at] = [(c, {big: 1}) for c in contested]
        plans.append(plan)
    return plans


def _state(engine: sa.Engine) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Allocations by consumer ({provider uuid: VCPU}) and the capacity of each provider."""
    a, rp, inv = t.allocations, t.resource_providers, t.inventories
    with transaction(engine) as conn:
        held: dict[str, dict[str, int]] = {}
        for consumer, rp_uuid, used in conn.execute(
            sa.select(a.c.consumer_id, rp.c.uuid, a.c.used).join(
                rp, rp.c.id == a.c.resource_provider_id
            )
        ):
            held.setdefault(consumer, {})[rp_uuid] = used
        totals = dict(
            conn.execute(
                sa.select(rp.c.uuid, inv.c.total).join(inv, inv.c.resource_provider_id == rp.c.id)
            ).all()
        )
    return held, totals


def test_concurrent_claims_never_oversubscribe(engine):
    small = [provider_with_inventory(engine, VCPU=6) for _ in range(SMALL)]
    big = provider_with_inventory(engine, VCPU=1000)
    url = engine.url.render_as_string(hide_password=False)
    # Fork: the children start at once with everything imported. No connection
    # may cross the fork, so the parent's pool is emptied first.
    engine.dispose()
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(url, plan, barrier, results))
        for plan in _plans(small, big)
    ]
    for proc in procs:
        proc.start()
    answers = [a for _ in procs for a in results.get(timeout=120)]
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    assert len(answers) == WORKERS * (SMALL * CLAIMS_PER_PHASE + CONTESTED)

    held, totals = _state(engine)
    used = {rp: sum(h.get(rp, 0) for h in held.values()) for rp in totals}
    assert all(used[rp] <= totals[rp] for rp in totals), (used, totals)

    accepted = {c: allocs for c, allocs, status, _ in answers if status == 204}
    assert held == accepted  # every acknowledged claim, and nothing else
    for _consumer, allocations, status, detail in answers:
        if status == 204:
            continue
        assert status == 409, detail
        if big in allocations:  # lost the race to create a contested consumer
            assert "consumer generation conflict" in detail
        else:  # refused for capacity, and the final state agrees it was full
            assert "exceed the capacity" in detail
            assert any(used[rp] + n > totals[rp] for rp, n in allocations.items())
    contested = {c for c, allocs, _, _ in answers if big in allocs}
    assert all(c in accepted for c in contested)  # each created exactly once (dict key)
    assert sum(1 for c, _, s, _ in answers if c in contested and s == 204) == CONTESTED
    assert all(used[rp] == totals[rp] for rp in small)  # more was asked than fits
