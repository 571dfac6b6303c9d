"""Three `tally serve` hosts, each on its own node of a 3-node Galera cluster and at
its own address: concurrent claims, deletes and inventory writes through all three
give no 5xx, oversubscribe nothing and lose no acknowledged write; a claim through
one host is seen by the very next search through another; a node frozen, cut off
or killed makes its host answer 503 within seconds while the others serve, and it
comes back by itself; on the frozen node's host every request of each kind is a 503
within the read timeout plus a second. (The benchmark, bench/cluster.py, runs the
long version.)"""

from __future__ import annotations

import concurrent.futures
import time
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

import cluster as bench  # bench/cluster.py (put on sys.path by conftest)
import cluster_load as load  # bench/cluster_load.py
import httpx
import pytest

from tally.db.mysql import MYSQL_TIMEOUTS
from tests.live import CLUSTER_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TIMEOUT)]

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


FROZEN_ROUNDS = 12  # requests of each kind through the host of a frozen node
FROZEN_CLIENTS = 8  # at once: no more than a worker's threads, so none waits in line


def _frozen_requests(provider: str) -> dict[str, tuple[str, str, dict | None]]:
    """The requests a frozen node's host is asked: kind -> (method, path, body)."""
    inventory = {
        "resource_provider_generation": 1,
        "inventories": {"VCPU": {"total": load.VCPU_TOTAL, "allocation_ratio": 1.0}},
    }
    return {
        "providers": ("GET", "/resource_providers", None),
        "candidates": ("GET", "/allocation_candidates?resources=VCPU:1", None),
        "claim": ("PUT", "/allocations/{consumer}", load._claim_body(provider)),
        "inventory": ("PUT", f"/resource_providers/{provider}/inventories", inventory),
    }


def _timed(host: str, method: str, path: str, body: dict | None) -> tuple[float, httpx.Response]:
    path = path.format(consumer=uuidlib.uuid4())
    started = time.monotonic()
    resp = httpx.request(method, host + path, json=body, headers=load.HEADERS, timeout=60)
    return time.monotonic() - started, resp


def frozen_node_times(
    hosts: bench.Hosts, rounds: int = FROZEN_ROUNDS, clients: int = FROZEN_CLIENTS
) -> dict[str, list[tuple[float, httpx.Response]]]:
    """db3 frozen: `rounds` requests of each kind through its host, `clients` at a
    time, the kinds interleaved; each one's seconds and answer (kind -> list)."""
    bench.wait_synced()
    first, _, third = hosts.urls
    provider = load.seed(first, 1, prefix="frozen")[0]
    kinds = _frozen_requests(provider)
    for method, path, body in kinds.values():  # its pools hold connections in use
        _timed(third, method, path, body)
    jobs = [kind for _ in range(rounds) for kind in kinds]
    bench.cluster("freeze", "db3")
    try:
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            answers = list(pool.map(lambda kind: (kind, _timed(third, *kinds[kind])), jobs))
    finally:
        bench.cluster("thaw", "db3")
    found: dict[str, list[tuple[float, httpx.Response]]] = {kind: [] for kind in kinds}
    for kind, answer in answers:
        found[kind].append(answer)
    bench.wait_synced()
    deadline = time.monotonic() + 60
    while _healthy(third) != 200:
        assert time.monotonic() < deadline, "host 3 did not come back by itself"
        time.sleep(0.5)
    return found


def _figures(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"worst {ordered[-1]:.2f} s, p99 {p99:.2f} s, median {ordered[len(ordered) // 2]:.2f} s"


def test_every_request_to_a_frozen_node_is_a_503_within_the_read_timeout(hosts: bench.Hosts):
    """Not only the first: a request's connect, greeting, ping and statements share
    one read timeout (tally.db.deadline); before, a TCP connect's second plus the
    greeting's full timeout, or a ping and a reconnect, added up past it."""
    found = frozen_node_times(hosts)
    for kind, answers in found.items():
        print(f"frozen node, {kind}: {len(answers)} answers, {_figures([s for s, _ in answers])}")
    for kind, answers in found.items():
        for seconds, resp in answers:
            assert resp.status_code == 503, (kind, resp.status_code, resp.text)
            assert resp.headers["retry-after"], kind
            assert resp.json()["errors"][0]["status"] == 503, kind
            assert seconds <= BOUND, f"{kind}: a 503 after {seconds:.2f} s (bound {BOUND} s)"
