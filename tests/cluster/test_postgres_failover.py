"""PostgreSQL high availability: Tally given both hosts of a primary with a
synchronous streaming standby (`host=a&host=b&target_session_attrs=read-write`).
The primary killed under load: the service answers 503 (never a 500) until the
standby is promoted, then follows the new primary by itself; every acknowledged
write is on the new primary and no provider is oversubscribed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import cluster_load as load  # bench/cluster_load.py (put on sys.path by conftest)
import httpx
import pytest
from cluster import cluster, first_status  # bench/cluster.py

from tests.live import CLUSTER_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TIMEOUT)]

HOST, PORT = "10.77.0.24", 8778


@contextlib.contextmanager
def tally_on_both_hosts(logs: Path) -> Iterator[str]:
    subprocess.run(
        ["psql", "-h", "10.77.0.31", "-U", "postgres", "-c", "CREATE DATABASE tally"],
        check=True,
        capture_output=True,
    )
    url = cluster("url", "pg").strip().replace("postgres@/", "postgres@/tally")
    env = dict(
        os.environ,
        TALLY_DATABASE_URL=url,
        TALLY_HOST=HOST,
        TALLY_PORT=str(PORT),
        TALLY_WORKERS="2",
        TALLY_AUTH_STRATEGY="noauth",
        TALLY_NOAUTH_ALLOW_REMOTE="1",
    )
    subprocess.run(["ip", "addr", "add", f"{HOST}/24", "dev", "tly-c"], check=False)
    tally = str(Path(sys.executable).parent / "tally")
    with open(logs / "tally.log", "w") as log:
        proc = subprocess.Popen(
            [tally, "serve"], env=env, stdout=log, stderr=log, start_new_session=True
        )
    base = f"http://{HOST}:{PORT}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, (logs / "tally.log").read_text()[-2000:]
            time.sleep(0.3)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)


def test_the_primary_killed_under_load_loses_nothing(postgres_pair, tmp_path):
    with tally_on_both_hosts(tmp_path) as url:
        providers = load.seed(url, 8, prefix="failover")
        done: dict = {}

        def traffic() -> None:
            done["books"], _ = load.run([url], providers, clients=6, seconds=25, disjoint=True)

        runner = threading.Thread(target=traffic)
        runner.start()
        time.sleep(5)
        cluster("kill", "pg1")
        took = first_status(url, {503}, 10)
        time.sleep(2)  # the operator (or a failover manager) promotes the standby
        cluster("promote", "pg2")
        back = first_status(url, {201}, 30)
        runner.join()
        books = done["books"]
        assert took is not None and took <= 3, f"503 only after {took} s"
        assert back is not None, "Tally did not follow the promoted standby"
        statuses = {status for (_, status) in books.statuses}
        assert statuses <= {200, 204, 409, 503}, books.server_errors  # no 500, no hang
        assert books.count("claim", 204) > 0 and books.count("delete", 204) > 0
        verdict = load.verify(url, providers, books)
        assert verdict.clean, verdict  # every acknowledged write survived the failover
        assert cluster("status", "pg2").strip() == "primary"
