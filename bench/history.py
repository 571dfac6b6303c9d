#!/usr/bin/env python3
"""Claims per second with the claim history on and off, in-process.

Builds P providers with room for every claim, then makes C claims in each mode
(`PUT /allocations/{new consumer}` at 1.39, as Nova's scheduler does, with a global
request id) through an app with `history = true` and one with `history = false`,
over the same database (falcon test client, no network), in small batches that
alternate between the two: so both see the same database (it grows as claims land)
and the same load of the machine. Prints claims per second of each mode, by wall
time and by this process's CPU time (steadier on a busy machine; with SQLite the
database works in this process too), and how much lower the history makes them
(the goal: under 10%). The rows the history wrote are counted as a check (one per
claim and class).

  .venv/bin/python bench/history.py                       # SQLite, 5000 claims a mode
  .venv/bin/python bench/history.py --claims 20000 --threads 4
  .venv/bin/python bench/history.py --database-url postgresql+psycopg://u@h/empty_db
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import threading
import time
import uuid

import falcon.testing
import sqlalchemy as sa

from tally.config import Settings
from tally.db import schema as t
from tally.db.engine import make_engine
from tally.placement.app import create_app
from tally.placement.ledger.bootstrap import prepare_database

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
CLAIM = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
MODES = ("off", "on")


def client(engine: sa.Engine, history: bool) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(Settings.of(history=history), engine), HEADERS)


def build(engine: sa.Engine, providers: int, room: int) -> list[str]:
    setup = client(engine, history=False)
    uuids = []
    for _ in range(providers):
        rp = str(uuid.uuid4())
        body = {"name": f"bench-{rp[:8]}", "uuid": rp}
        assert setup.simulate_post("/resource_providers", json=body).status_code == 200
        inventories = {rc: {"total": amount * room} for rc, amount in CLAIM.items()}
        body = {"resource_provider_generation": 0, "inventories": inventories}
        found = setup.simulate_put(f"/resource_providers/{rp}/inventories", json=body)
        assert found.status_code == 200, found.text
        uuids.append(rp)
    return uuids


def claims(
    app: falcon.testing.TestClient, providers: list[str], count: int, threads: int
) -> tuple[float, float]:
    """Make `count` claims over `threads` threads: (wall seconds, CPU seconds)."""
    per_thread = [count // threads + (1 if n < count % threads else 0) for n in range(threads)]
    failures: list[str] = []

    def work(share: int, offset: int) -> None:
        for n in range(share):
            rp = providers[(offset + n) % len(providers)]
            body = {
                "allocations": {rp: {"resources": CLAIM}},
                "project_id": "bench-project",
                "user_id": "bench-user",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            headers = {"x-openstack-request-id": f"req-{uuid.uuid4()}"}
            done = app.simulate_put(f"/allocations/{uuid.uuid4()}", json=body, headers=headers)
            if done.status_code != 204:
                failures.append(done.text)

    workers = [
        threading.Thread(target=work, args=(share, sum(per_thread[:n])))
        for n, share in enumerate(per_thread)
    ]
    started, cpu = time.perf_counter(), time.process_time()
    if threads == 1:
        work(count, 0)
    else:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if failures:
        raise SystemExit(f"{len(failures)} claims failed, e.g. {failures[0]}")
    return elapsed, cpu


def history_rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(t.history)).scalar()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, default=50)
    parser.add_argument("--claims", type=int, default=5000, help="claims in each mode")
    parser.add_argument("--batch", type=int, default=100, help="claims before switching mode")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--database-url", default="", help="an empty database (default SQLite)")
    args = parser.parse_args()
    logging.getLogger("tally").setLevel(logging.WARNING)  # no request log lines
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='tally-hist-')}/t.sqlite"
    engine = make_engine(url)
    prepare_database(engine)
    warmup = 200
    providers = build(engine, args.providers, 2 * (args.claims + warmup) // args.providers + 1)
    apps = {"off": client(engine, history=False), "on": client(engine, history=True)}
    print(
        f"history bench: {engine.dialect.name}, {args.providers} providers, {args.claims} "
        f"claims a mode in batches of {args.batch}, {args.threads} thread(s)",
        flush=True,
    )
    for mode in MODES:
        claims(apps[mode], providers, warmup // 2, args.threads)
    rows_before = history_rows(engine)
    spent = {mode: [0.0, 0.0] for mode in MODES}  # wall, CPU seconds
    batches = max(1, args.claims // args.batch)
    for n in range(batches):
        for mode in MODES if n % 2 == 0 else reversed(MODES):
            wall, cpu = claims(apps[mode], providers, args.batch, args.threads)
            spent[mode][0] += wall
            spent[mode][1] += cpu
        if (n + 1) % max(1, batches // 5) == 0:
            so_far = ", ".join(
                f"{mode} {(n + 1) * args.batch / spent[mode][0]:6.1f}/s" for mode in MODES
            )
            print(f"  {(n + 1) * args.batch:6d} claims a mode: {so_far}", flush=True)
    done = batches * args.batch
    for n, unit in enumerate(("claims/s", "claims per CPU second")):
        off, on = (done / spent[mode][n] for mode in MODES)
        print(f"{unit:<21} history off {off:8.1f}, on {on:8.1f}: {(off - on) / off:.1%} lower")
    written, expected = history_rows(engine) - rows_before, done * len(CLAIM)
    print(f"history rows written by the measured claims: {written} (expected {expected})")
    engine.dispose()


if __name__ == "__main__":
    main()
