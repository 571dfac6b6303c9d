#!/usr/bin/env python3
"""Issue 31's figures for one backend, on bench/scale_cloud.py's cloud (N hosts, each
a tree with devices as child providers; ~14 providers and ~142 allocations a host):

  setup      the cloud written straight into the database (providers, then servers)
  index      a worker's load time and memory: providers alone, then with the servers
             (bytes a provider, bytes an allocation), each in a fresh process
  candidates p50 per shape with `limit=50`; whole: the first ask, then the p50 of the
             asks its kept answer serves; RSS across 100 whole answers
  catch-up   1,000 spread claims in-process (claims/s), then the index catching up
  history    claims/s with the claim history on and off (its share of a write), and
             the journal's share (time in its flush)
  burst      10,000 new consumers through `POST /allocations` in batches of 1,000
  served     `tally serve --workers 1` and `4`: 1,000 spread claims from 8 client threads
  upstream   (--upstream SECONDS) the same cloud exported (`tally db export`) into
             upstream Placement 16.0.0 on SQLite (--upstream-database-url: an empty
             database elsewhere), 4 gunicorn workers: candidates per shape, the served
             claims and the burst, each request given SECONDS (needs /tmp/perf-venv,
             see ../shared/tools/perf)

  .venv/bin/python bench/scale.py --hosts 7150                  # 100,320 providers
  .venv/bin/python bench/scale.py --hosts 7150 --database-url postgresql+psycopg://u@h/db
  .venv/bin/python bench/scale.py --hosts 700 --upstream 120
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

import falcon.testing
import httpx
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_cloud  # noqa: E402
from scale_cloud import ADMIN, SHAPES, Cloud  # noqa: E402

from tally.config import Settings  # noqa: E402
from tally.db import journal  # noqa: E402
from tally.db import schema as t  # noqa: E402
from tally.db.engine import make_engine  # noqa: E402
from tally.placement.app import create_app  # noqa: E402
from tally.placement.ledger.bootstrap import prepare_database  # noqa: E402
from tally.placement.ledger.candidates.index import Index, rss_mb  # noqa: E402

INDEX_MB = 8192
UPSTREAM_VENV = Path("/tmp/perf-venv")
UPSTREAM_WORKERS = 4  # gunicorn's, as `tally serve --workers 4` (one serves a search alone)
CLAIMED = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}  # what each served claim takes
TALLY = str(Path(sys.executable).parent / "tally")  # (this venv's, on PATH or not)


def say(text: str) -> None:
    print(text, flush=True)


def index_in_child(url: str) -> tuple[float, float]:
    """(seconds, MiB) a fresh process takes to load the index of `url`."""
    done = subprocess.run(
        [sys.executable, __file__, "--index-of", url], capture_output=True, text=True, check=True
    )
    seconds, mib = done.stdout.split()
    return float(seconds), float(mib)


def load_index(url: str) -> None:
    engine = make_engine(url)
    index = Index(0)
    started = time.perf_counter()
    with index.held(engine):
        pass
    print(f"{time.perf_counter() - started:.3f} {index.grown_mb:.1f}")


def settle(engine: sa.Engine) -> None:
    """PostgreSQL: the tables as autovacuum leaves them in a running cloud (a bulk
    load leaves no visibility map: every index-only read visits the rows too)."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
        say("# PostgreSQL: VACUUM ANALYZE after the bulk load")


def claim_body(provider: str, resources: dict) -> dict:
    return {
        "allocations": {provider: {"resources": resources}},
        "project_id": "bench",
        "user_id": "bench",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }


def spread(cloud: Cloud) -> list[str]:
    """Compute roots, in an order that spreads consecutive claims over the cloud."""
    roots = [p.uuid for p in cloud.providers if p.parent is None and "VCPU" in p.inventories]
    return [roots[n * 7919 % len(roots)] for n in range(len(roots))]


def candidates(client: falcon.testing.TestClient, cloud: Cloud, k: int) -> None:
    shapes = dict(SHAPES)
    shapes["shared_disk"] += ",".join(cloud.aggregates[:3])
    say(
        f"{'shape':<22} {'limit=50 p50 ms':>16} {'n':>5} {'whole, first ms':>16}"
        f" {'again p50 ms':>13} {'n':>7}"
    )
    for name, query in shapes.items():
        limited, n_limited = timed(client, query + "&limit=50", k)
        whole, n_whole = timed(client, query, k)
        say(
            f"{name:<22} {statistics.median(limited):>16.1f} {n_limited:>5} {whole[0]:>16.1f}"
            f" {statistics.median(whole[1:] or whole):>13.1f} {n_whole:>7}"
        )


def timed(client: falcon.testing.TestClient, query: str, k: int) -> tuple[list[float], int]:
    """Milliseconds of each of `k` asks (the first finds no answer kept for it; the
    index keeps a whole answer for the next ask while its trees stay as they are)."""
    times, count = [], 0
    for _ in range(k):
        started = time.perf_counter()
        answer = client.simulate_get("/allocation_candidates", query_string=query)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text
        count = len(answer.json["allocation_requests"])
    return times, count


def memory_across(client: falcon.testing.TestClient, answers: int) -> None:
    """RSS after each of `answers` whole simple answers: flat, or growing."""
    seen = []
    for _ in range(answers):
        found = client.simulate_get("/allocation_candidates", query_string=SHAPES["simple"])
        assert found.status_code == 200
        del found
        seen.append(rss_mb())
    say(
        f"# RSS across {answers} whole simple answers: after the 1st {seen[0]:.0f} MiB, "
        f"10th {seen[min(9, answers - 1)]:.0f}, last {seen[-1]:.0f}, most {max(seen):.0f}"
    )


def claims(
    client: falcon.testing.TestClient, roots: list[str], count: int, first: int = 0
) -> list[str]:
    """`count` new consumers each claiming on the next root from `first`."""
    made = []
    for n in range(first, first + count):
        consumer = str(uuidlib.uuid4())
        body = claim_body(roots[n % len(roots)], {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1})
        answer = client.simulate_put(f"/allocations/{consumer}", json=body)
        assert answer.status_code == 204, answer.text
        made.append(consumer)
    return made


def release(client: falcon.testing.TestClient, consumers: list[str]) -> None:
    for consumer in consumers:
        client.simulate_delete(f"/allocations/{consumer}")


def catch_up(
    client: falcon.testing.TestClient, engine: object, index: Index, roots: list[str]
) -> None:
    started = time.perf_counter()
    made = claims(client, roots, 1000)
    claimed = time.perf_counter() - started
    started = time.perf_counter()
    with index.held(engine):
        pass
    caught = (time.perf_counter() - started) * 1000
    say(f"# 1,000 spread claims: {1000 / claimed:.0f}/s; the index caught up in {caught:.1f} ms")
    release(client, made)


@contextlib.contextmanager
def timing(module: object, name: str, spent: list[float]) -> Iterator[None]:
    """Add the time spent in `module.name` to `spent[0]` while inside."""
    original = getattr(module, name)

    def timed_call(*args: object, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started

    setattr(module, name, timed_call)
    try:
        yield
    finally:
        setattr(module, name, original)


def history_share(engine: object, roots: list[str]) -> None:
    """Claims/s with the history on and off, in alternating rounds (the same database
    and load for both); the journal's flush timed in the rounds with history."""
    apps = {
        mode: falcon.testing.TestClient(
            create_app(Settings.of(candidates_index_max_mb=INDEX_MB, history=mode), engine),
            ADMIN,
        )
        for mode in (True, False)
    }
    spent = {True: 0.0, False: 0.0}
    journal_spent = [0.0]
    rounds, each = 10, 200
    for n in range(rounds):
        for mode in (True, False) if n % 2 == 0 else (False, True):
            started = time.perf_counter()
            if mode:
                with timing(journal, "_flush", journal_spent):
                    made = claims(apps[mode], roots, each, n * each)
            else:
                made = claims(apps[mode], roots, each, n * each)
            spent[mode] += time.perf_counter() - started
            release(apps[False], made)  # (untimed: the next round finds the same room)
    total = rounds * each
    on, off = total / spent[True], total / spent[False]
    say(
        f"# claims with history {on:.0f}/s, without {off:.0f}/s: the history takes "
        f"{(1 - on / off) * 100:.1f}% of a claim; the journal's flush "
        f"{journal_spent[0] / spent[True] * 100:.1f}%"
    )


def burst_batches(roots: list[str]) -> Iterator[tuple[int, dict, dict]]:
    """The burst's 10 batches: (consumers before it, the claims of 1,000 new
    consumers spread over `roots`, the same consumers emptied: room again)."""
    resources = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    for start in range(0, 10_000, 1000):
        batch = [str(uuidlib.uuid4()) for _ in range(1000)]
        claims = {
            consumer: claim_body(roots[(start + n) % len(roots)], resources)
            for n, consumer in enumerate(batch)
        }
        emptied = {
            consumer: {**claim_body(roots[0], {}), "allocations": {}, "consumer_generation": 1}
            for consumer in batch
        }
        yield start, claims, emptied


def burst(engine: object, roots: list[str], history: bool) -> None:
    client = falcon.testing.TestClient(
        create_app(Settings.of(candidates_index_max_mb=INDEX_MB, history=history), engine), ADMIN
    )
    seconds = 0.0
    for _, claims, emptied in burst_batches(roots):
        started = time.perf_counter()
        answer = client.simulate_post("/allocations", json=claims)
        seconds += time.perf_counter() - started
        assert answer.status_code == 204, answer.text
        answer = client.simulate_post("/allocations", json=emptied)  # (untimed)
        assert answer.status_code == 204, answer.text
    say(
        f"# burst of 10,000 consumers in POST /allocations batches of 1,000 (history "
        f"{'on' if history else 'off'}): {10_000 / seconds:,.0f} consumers/s"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], url: str, wait: float) -> Iterator[None]:
    """A server started in its own process group, up when `url` answers; stopped after."""
    log = tempfile.NamedTemporaryFile(prefix="tally-scale-server-", suffix=".log", delete=False)
    server = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=log, stderr=log, start_new_session=True
    )
    try:
        deadline = time.monotonic() + wait
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=5).status_code < 500:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{command[0]} did not come up: see {log.name}")
            time.sleep(0.5)
        yield
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def served_claims(url: str, roots: list[str], workers: int, threads: int) -> None:
    """`tally serve --workers N` over the database: 1,000 spread claims from client
    threads; after the server stopped (SIGTERM), the database read alone holds every
    acknowledged claim where it was made and nothing of a refused one."""
    port = free_port()
    env = {
        "TALLY_DATABASE_URL": url,
        "TALLY_AUTH_STRATEGY": "noauth",
        "TALLY_LAB": "off",
        "TALLY_HISTORY": "true",
    }
    command = [TALLY, "serve", "--port", str(port), "--workers", str(workers)]
    base = f"http://127.0.0.1:{port}"
    with running(command, env, base + "/", wait=120):
        made, failures, seconds = claims_over_http(base, roots[:1000], threads)
    found, lost = stored_claims(url, made, failures)
    say(
        f"# tally serve --workers {workers}, {threads} client threads: "
        f"{len(made) / seconds:.0f} claims/s ({len(failures)} failed"
        + (f", e.g. {next(iter(failures.values()))}" if failures else "")
        + f"); after SIGTERM the database holds {found:,} of {len(made):,} acknowledged"
        + (f", LOST OR WRONG: {lost[:3]}" if lost else "")
    )
    with running(command, env, base + "/", wait=120):
        release_over_http(base, list(made))


def stored_claims(url: str, made: dict[str, str], refused: dict[str, str]) -> tuple[int, list[str]]:
    """How many claims of `made` (consumer -> provider) the database holds as made,
    and each one missing or wrong, or of `refused`, present."""
    engine = make_engine(url)
    rp, rc, a = t.resource_providers, t.resource_classes, t.allocations
    query = (
        sa.select(a.c.consumer_id, rp.c.uuid, rc.c.name, a.c.used)
        .join(rp, rp.c.id == a.c.resource_provider_id)
        .join(rc, rc.c.id == a.c.resource_class_id)
        .where(a.c.consumer_id.in_(sa.bindparam("ids", expanding=True)))
    )
    held: dict[str, set] = {}
    ids = [*made, *refused]
    with engine.connect() as conn:
        for start in range(0, len(ids), 500):
            for consumer, provider, name, used in conn.execute(query, {"ids": ids[start:][:500]}):
                held.setdefault(consumer, set()).add((provider, name, used))
    engine.dispose()
    lost = [
        f"{consumer}: {sorted(held.get(consumer, ()))}"
        for consumer, provider in made.items()
        if held.get(consumer) != {(provider, name, n) for name, n in CLAIMED.items()}
    ]
    lost += [f"refused {consumer} stored" for consumer in refused if consumer in held]
    return len(made) - len(lost), lost


def claims_over_http(
    base: str, providers: list[str], threads: int
) -> tuple[dict[str, str], dict[str, str], float]:
    """A new consumer's claim on each of `providers`, from `threads` client threads:
    the consumers made (-> provider), the failed ones (-> why), the seconds taken."""
    made: dict[str, str] = {}
    failures: dict[str, str] = {}

    def work(share: list[str]) -> None:
        with httpx.Client(base_url=base, headers=ADMIN, timeout=60) as api:
            for provider in share:
                consumer = str(uuidlib.uuid4())
                answer = api.put(f"/allocations/{consumer}", json=claim_body(provider, CLAIMED))
                if answer.status_code == 204:
                    made[consumer] = provider
                else:
                    failures[consumer] = f"{answer.status_code} {answer.text[:200]}"

    pool = [threading.Thread(target=work, args=(providers[n::threads],)) for n in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return made, failures, time.perf_counter() - started


def release_over_http(base: str, consumers: list[str]) -> None:
    with httpx.Client(base_url=base, headers=ADMIN, timeout=60) as api:
        for consumer in consumers:
            api.delete(f"/allocations/{consumer}")


def burst_over_http(base: str, roots: list[str], seconds: float) -> str:
    """`burst` through a server: consumers/s, or how far it got in `seconds` a batch."""
    spent = 0.0
    with httpx.Client(base_url=base, headers=ADMIN, timeout=seconds) as api:
        for start, claims, emptied in burst_batches(roots):
            started = time.perf_counter()
            try:
                answer = api.post("/allocations", json=claims)
            except httpx.TimeoutException:
                return f"a batch of 1,000 took over {seconds:.0f} s (after {start:,} consumers)"
            spent += time.perf_counter() - started
            if answer.status_code != 204:
                return f"HTTP {answer.status_code} after {start:,} consumers: {answer.text[:200]}"
            api.post("/allocations", json=emptied)  # (untimed)
    return f"{10_000 / spent:,.0f} consumers/s"


def upstream(url: str, cloud: Cloud, seconds: float, target: str | None = None) -> None:
    """The same cloud in upstream Placement 16.0.0: candidates per shape. `target`: an
    empty PostgreSQL or MySQL database for it (default: a new SQLite)."""
    if not (UPSTREAM_VENV / "bin" / "gunicorn").exists():
        say(f"# upstream: skipped (no upstream Placement in {UPSTREAM_VENV})")
        return
    folder = Path(tempfile.mkdtemp(prefix="tally-scale-upstream-"))
    target = target or f"sqlite:///{folder}/placement.sqlite"
    theirs = sa.make_url(target)  # (upstream's drivers: psycopg2, PyMySQL)
    if theirs.get_backend_name() == "postgresql":
        theirs = theirs.set(drivername="postgresql+psycopg2")
    (folder / "conf").mkdir()
    (folder / "conf" / "placement.conf").write_text("")
    env = {
        "OS_PLACEMENT_DATABASE__CONNECTION": theirs.render_as_string(hide_password=False),
        "OS_API__AUTH_STRATEGY": "noauth2",
        "OS_PLACEMENT_CONFIG_DIR": str(folder / "conf"),
        "OS_DEFAULT__DEFAULT_LOG_LEVELS": "placement=WARNING,placement.requestlog=WARNING,"
        "sqlalchemy=WARN,oslo_policy=WARN",
    }
    subprocess.run(
        [str(UPSTREAM_VENV / "bin" / "placement-manage"), "db", "sync"],
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    started = time.perf_counter()
    subprocess.run(
        [TALLY, "db", "export", "--to", target],
        env={**os.environ, "TALLY_DATABASE_URL": url},
        check=True,
        capture_output=True,
    )
    say(
        f"# upstream on {theirs.get_backend_name()}: the cloud exported into its schema in "
        f"{time.perf_counter() - started:.0f} s"
    )
    settle(sa.create_engine(target))  # (as ours; not make_engine: it refuses their schema)
    port = free_port()
    command = [
        str(UPSTREAM_VENV / "bin" / "gunicorn"),
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(UPSTREAM_WORKERS),
        "--timeout",
        str(int(seconds) + 30),
        "placement.wsgi.api:application",
    ]
    base = f"http://127.0.0.1:{port}"
    shapes = dict(SHAPES)
    shapes["shared_disk"] += ",".join(cloud.aggregates[:3])
    with running(command, env, base + "/", wait=120):
        say(f"{'upstream shape':<22} {'limit=50 s':>11} {'n':>5} {'whole s':>9} {'n':>7}")
        for name, query in shapes.items():
            line = f"{name:<22}"
            for extra in ("&limit=50", ""):
                started = time.perf_counter()
                try:
                    answer = httpx.get(
                        f"{base}/allocation_candidates?{query}{extra}",
                        headers={**ADMIN, "x-auth-token": "admin"},
                        timeout=seconds,
                    )
                    took = time.perf_counter() - started
                    n = len(answer.json()["allocation_requests"]) if answer.is_success else 0
                    shown = f"{took:.2f}" if answer.is_success else f"HTTP {answer.status_code}"
                except httpx.TimeoutException:
                    shown, n = f">{seconds:.0f}", 0
                line += f" {shown:>11} {n:>5}" if extra else f" {shown:>9} {n:>7}"
            say(line)
        roots = spread(cloud)
        made, failures, took = claims_over_http(base, roots[:1000], threads=8)
        say(
            f"# upstream, {UPSTREAM_WORKERS} gunicorn workers, 8 client threads: "
            f"{len(made) / took:.0f} claims/s ({len(failures)} failed)"
        )
        release_over_http(base, list(made))
        say(
            "# upstream, burst of 10,000 consumers in POST /allocations batches of 1,000: "
            + burst_over_http(base, roots, seconds)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=700)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("-k", type=int, default=5, help="asks per shape (p50 of them)")
    parser.add_argument("--database-url", help="an empty database (default: a new SQLite)")
    parser.add_argument("--answers", type=int, default=100, help="whole answers for RSS")
    parser.add_argument("--workers", default="1,4", help="tally serve's workers, each run")
    parser.add_argument("--upstream", type=float, default=0, help="seconds a request (0: none)")
    parser.add_argument("--upstream-database-url", help="an empty database for upstream")
    parser.add_argument("--index-of", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.index_of:
        load_index(args.index_of)
        return
    logging.getLogger("tally").setLevel(logging.WARNING)
    started = time.perf_counter()
    cloud = scale_cloud.generate(args.hosts, args.seed)
    # The cloud as generated is the client's, not the server's: a server process never
    # holds its million allocations, whose objects every full collection of the
    # server's garbage would walk again here (40 ms of each burst batch of 180).
    gc.collect()
    gc.freeze()
    allocations = sum(len(r["resources"]) for _, held in cloud.prepop for r in held.values())
    say(
        f"# {args.hosts} hosts: {len(cloud.providers):,} providers, {len(cloud.prepop):,} "
        f"consumers, {allocations:,} allocations (generated in "
        f"{time.perf_counter() - started:.1f} s)"
    )
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='tally-scale-')}/scale.sqlite"
    engine = make_engine(url)
    prepare_database(engine)
    say(f"# backend: {engine.dialect.name}")
    started = time.perf_counter()
    scale_cloud.write_providers(engine, cloud)
    written = time.perf_counter() - started
    load, providers_mib = index_in_child(url)
    say(
        f"# providers written in {written:.1f} s; index of the providers alone: load {load:.2f} s, "
        f"{providers_mib:.0f} MiB, {providers_mib * 2**20 / len(cloud.providers):.0f} B a provider"
    )
    started = time.perf_counter()
    scale_cloud.write_servers(engine, cloud)
    written = time.perf_counter() - started
    settle(engine)
    load, mib = index_in_child(url)
    say(
        f"# servers written in {written:.1f} s; index with them: load {load:.2f} s, {mib:.0f} MiB, "
        f"{(mib - providers_mib) * 2**20 / max(1, allocations):.0f} B an allocation"
    )
    index = Index(INDEX_MB)  # the app's, handed in: catch_up times it alone
    client = falcon.testing.TestClient(
        create_app(Settings.of(candidates_index_max_mb=INDEX_MB), engine, index), ADMIN
    )
    client.simulate_get("/allocation_candidates", query_string="resources=VCPU:1&limit=1")
    candidates(client, cloud, args.k)
    gc.collect()
    memory_across(client, args.answers)
    roots = spread(cloud)
    catch_up(client, engine, index, roots)
    history_share(engine, roots)
    for history in (True, False):
        burst(engine, roots, history)
    for workers in map(int, args.workers.split(",")):
        served_claims(url, roots, workers, threads=8)
    if args.upstream:
        upstream(url, cloud, args.upstream, args.upstream_database_url)


if __name__ == "__main__":
    main()
