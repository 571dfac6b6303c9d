"""Three `tally serve` hosts, each on its own node of a 3-node Galera cluster and at
its own address: concurrent claims, deletes and inventory writes through all three
give no 5xx, oversubscribe nothing and lose no acknowledged write; a claim through
one host is seen by the very next search through another; a node frozen, cut off
or killed makes its host answer 503 within seconds while the others serve, and it
comes back by itself. (The benchmark, bench/cluster.py, runs the long version.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import cluster as bench  # bench/cluster.py (put on sys.path by conftest)
import cluster_load as load  # bench/cluster_load.py
import httpx
import pytest

from tally.db.mysql import MYSQL_TIMEOUTS

BOUND = MYSQL_TIMEOUTS["read_timeout"] + 1  # a frozen node's statement times out, then 503


@pytest.fixture(scope="module")
def hosts(galera: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[bench.Hosts]:
    logs: Path = tmp_path_factory.mktemp("galera-hosts")
    three = bench.Hosts("tally", "tally_test", logs)
    try:
        three.start()  # (a host that did start is stopped even when another did not)
        yield three
    finally:
        three.stop()


def _healthy(url: str) -> int:
    try:
        return httpx.get(f"{url}/healthcheck", timeout=5).status_code
    except httpx.HTTPError:
        return 0


def test_three_writers_lose_nothing_and_answer_no_5xx(hosts: bench.Hosts):
    providers = load.seed(hosts.urls[0], 12, prefix="three-writers")
    for share, seconds, apart in ((providers, 12, True), (providers[:2], 6, False)):
        books, _ = load.run(hosts.urls, share, clients=8, seconds=seconds, disjoint=apart)
        assert books.five_xx == 0, books.server_errors
        assert books.count("claim", 204) and books.count("delete", 204)
        assert books.count("reserved", 200)
        verdict = load.verify(hosts.urls[2], providers, books)
        assert verdict.clean, verdict


def test_a_claim_through_one_host_is_seen_right_away_through_another(hosts: bench.Hosts):
    probe = load.seed(hosts.urls[0], 1, prefix="coherence")[0]
    for reader in hosts.urls[1:]:
        stale, probes = load.coherence_probe(hosts.urls[0], reader, probe, 40)
        assert (stale, probes) == (0, 80)


@pytest.mark.parametrize(
    "fault, heal", [(("freeze", "db3"), ("thaw", "db3")), (("cut", "db3"), ("join", "db3"))]
)
def test_a_frozen_or_cut_off_node_is_a_503_on_its_host_only(hosts: bench.Hosts, fault, heal):
    bench.wait_synced()
    first, _, third = hosts.urls
    bench.cluster(*fault)
    try:
        seen: list = []
        took = bench.first_status(third, {503}, 10, seen)
        assert took is not None and took <= BOUND, f"host 3 answered 503 after {took} s: {seen}"
        assert _healthy(third) == 503  # the load balancer stops sending there
        # the other nodes keep the Primary Component (after the pause of its view change)
        assert (
            bench.first_status(first, {201}, 10, trait=f"CUSTOM_STILL_{fault[0].upper()}")
            is not None
        )
    finally:
        bench.cluster(*heal)
    bench.wait_synced()
    deadline = time.monotonic() + 60
    while _healthy(third) != 200:
        assert time.monotonic() < deadline, "host 3 did not come back by itself"
        time.sleep(0.5)
    resp = httpx.get(f"{third}/traits/CUSTOM_STILL_{fault[0].upper()}", headers=load.HEADERS)
    assert resp.status_code == 204  # what was written meanwhile reached it


def test_a_killed_node_is_a_503_and_rejoins(hosts: bench.Hosts):
    bench.wait_synced()
    first, _, third = hosts.urls
    bench.cluster("kill", "db3")
    try:
        took = bench.first_status(third, {503}, 10)
        assert took is not None and took <= BOUND, f"host 3 answered 503 after {took} s"
        assert bench.first_status(first, {201}, 10, trait="CUSTOM_WHILE_DOWN") is not None
    finally:
        bench.cluster("start", "db3")
    bench.wait_synced()
    deadline = time.monotonic() + 60
    while _healthy(third) != 200:
        assert time.monotonic() < deadline, "host 3 did not come back by itself"
        time.sleep(0.5)
    assert httpx.get(f"{third}/traits/CUSTOM_WHILE_DOWN", headers=load.HEADERS).status_code == 204
