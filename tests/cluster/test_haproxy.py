"""HAProxy in front, as kolla-ansible and OpenStack-Ansible deploy it (`bin/cluster
haproxy up`): three `tally serve` hosts behind its API frontend, checked by
`GET /healthcheck`, and all three on its database frontend, where db1 is the one
writer and db2, db3 stand by as `backup`, each checked by its node's galera-check.

The writer frozen, cut off and killed (then thawed, joined, restarted) under load
through HAProxy's address: HAProxy takes it out by its check and the traffic moves to
a backup; clients see no status but 200, 201, 204, 409 and 503 (no 500, 502, 504, no
dropped connection); every acknowledged write is there afterwards and nothing is
oversubscribed; when db1 is back HAProxy makes it the writer again and closes the
backup's connections, so one node writes. Each fault's time until writes flow again
is printed at the end of the run (and with -s)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import cluster as bench  # bench/cluster.py (put on sys.path by conftest)
import cluster_load as load  # bench/cluster_load.py
import httpx
import pytest

from tests.live import CLUSTER_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(CLUSTER_TIMEOUT)]

DATABASE = "tally_haproxy"
FAULTS = {  # name -> (fault, heal), always on the writer, db1
    "frozen": (("freeze", "db1"), ("thaw", "db1")),
    "cut off": (("cut", "db1"), ("join", "db1")),
    "killed": (("kill", "db1"), ("start", "db1")),
}
# Not a speed bound: HAProxy's checks (1 s apart, 2 to fall or rise), Tally's read
# timeout (5 s) and a node's rejoin (a few seconds of IST) add up to well under it; a
# minute without a write means the traffic never moved.
LIVENESS = 60
ANSWERS = {200, 201, 204, 409, 503}  # what a client may be told meanwhile


def haproxy_states() -> dict[str, str]:
    """`proxy/server` -> its state as HAProxy sees it (`UP`, `DOWN`, `UP 1/2`...)."""
    lines = bench.cluster("haproxy", "status").splitlines()
    return {name: state.rsplit(" ", 1)[0] for name, state in (ln.split(" ", 1) for ln in lines)}


def wait_for(ready: Callable[[], bool], seconds: float, what: str | Callable[[], str]) -> None:
    """Until `ready()`; fails saying `what` (or what it returns) after `seconds`."""
    started = time.monotonic()
    while not ready():
        if time.monotonic() - started > seconds:
            pytest.fail(f"{what() if callable(what) else what} after {seconds} s")
        time.sleep(0.2)


def tally_connections(node: str) -> list[str]:
    """Tally's connections to DATABASE on `node` (a line each: id, client, command, state)."""
    sql = (
        "SELECT id, host, command, time, state FROM information_schema.processlist"
        f" WHERE db = '{DATABASE}'"
    )
    return bench.node_sql(node, sql).splitlines()


def one_writer() -> bool:
    """Tally's connections are all on db1 (none on a backup)."""
    return not tally_connections("db2") and not tally_connections("db3")


def on_backups() -> str:
    left = {node: tally_connections(node) for node in ("db2", "db3")}
    return f"Tally's connections left on the backups: {left}"


def all_up() -> bool:
    return all(state == "UP" for state in haproxy_states().values())


@pytest.fixture(scope="module")
def api(galera: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """HAProxy's API address, with three Tally hosts behind it on its database address."""
    logs: Path = tmp_path_factory.mktemp("haproxy-hosts")
    bench.cluster("haproxy", "up")
    via = urlsplit(bench.cluster("url", "vip").strip()).netloc.rpartition("@")[2]
    hosts = bench.Hosts("tally", DATABASE, logs, via=via)
    try:
        hosts.start()
        wait_for(all_up, LIVENESS, "HAProxy did not see every server up")
        yield bench.cluster("url", "api").strip()
    finally:
        hosts.stop()
        bench.cluster("haproxy", "down")


class Probe(threading.Thread):
    """Trait writes through `url`, one after another: (sent, answered, status) each;
    how many 503s HAProxy answered itself (no JSON body: no API host up)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.answers, self.done = url, [], threading.Event()
        self.haproxy_503 = 0  # HAProxy's own, when no API host passes its check

    def run(self) -> None:
        with load.client(self.url) as http:
            while not self.done.is_set():
                sent = time.monotonic()
                try:
                    resp = http.put(f"/traits/CUSTOM_HA_{time.monotonic_ns()}")
                    status, tally = resp.status_code, "json" in resp.headers.get("content-type", "")
                except httpx.HTTPError:
                    status, tally = 0, False
                self.answers.append((sent, time.monotonic(), status))
                self.haproxy_503 += status == 503 and not tally
                time.sleep(0.05)

    def acknowledged(self, since: float) -> list[float]:
        """When each write sent at or after `since` was acknowledged."""
        return [at for sent, at, status in list(self.answers) if sent >= since and status < 300]

    def longest_pause(self, since: float) -> float:
        """The longest time between acknowledgements after `since`."""
        times = [since, *self.acknowledged(since), time.monotonic()]
        return max(b - a for a, b in zip(times, times[1:], strict=False))


@pytest.mark.parametrize("name", list(FAULTS))
def test_the_writer_fails_over_and_back_through_haproxy(api: str, name: str, figures: list):
    fault, heal = FAULTS[name]
    bench.wait_synced()
    wait_for(all_up, LIVENESS, "HAProxy did not see every server up")
    providers = load.seed(api, 12, prefix=f"haproxy-{name}")
    stop, done = threading.Event(), {}

    def traffic() -> None:
        done["books"], _ = load.run(
            [api], providers, clients=6, seconds=10 * LIVENESS, disjoint=True, until=stop
        )

    runner, probe = threading.Thread(target=traffic), Probe(api)
    runner.start()
    probe.start()
    try:
        started = time.monotonic()
        wait_for(lambda: probe.acknowledged(started), 10, "no write before the fault")
        assert tally_connections("db1")
        wait_for(one_writer, 10, on_backups)
        bench.cluster(*fault)
        faulted = time.monotonic()  # in effect (a write sent before may still land)
        try:
            wait_for(lambda: probe.acknowledged(faulted), LIVENESS, "writes did not flow again")
            flowing = probe.acknowledged(faulted)[0] - faulted
            # moved by the check (a write may flow first: a connection HAProxy
            # could not open to db1 is dispatched again)
            down = lambda: haproxy_states()["galera/db1"].startswith("DOWN")  # noqa: E731
            wait_for(down, LIVENESS, "HAProxy did not take db1 out")
            during = haproxy_states()
            time.sleep(2)  # writes on the backup for a while
        finally:
            healed = time.monotonic()
            bench.cluster(*heal)  # (start: returns once db1 rejoined and is Synced)
        wait_for(lambda: haproxy_states()["galera/db1"] == "UP", LIVENESS, "db1 not back")
        back = time.monotonic() - healed
        wait_for(one_writer, 10, on_backups)  # HAProxy closed the backup's connections
        time.sleep(2)  # writes on db1 again
        pause = probe.longest_pause(healed)
    finally:
        stop.set()
        probe.done.set()
        runner.join()
        probe.join()
    books = done["books"]
    statuses: collections.Counter = collections.Counter()
    for (_, status), n in books.statuses.items():
        statuses[status] += n
    statuses.update(status for _, _, status in probe.answers)
    figures.append(
        f"HAProxy, writer {name}: writes flow again after {flowing:.1f} s"
        f" ({', '.join(f'{k} {v}' for k, v in during.items() if k.startswith('galera'))});"
        f" db1 the writer again {back:.1f} s after `{' '.join(heal)}`, writes paused at most"
        f" {pause:.1f} s meanwhile; statuses {dict(sorted(statuses.items()))}, of the probe's"
        f" {sum(s == 503 for *_, s in probe.answers)} 503s {probe.haproxy_503} from HAProxy"
    )
    print(figures[-1])
    assert during["galera/db1"].startswith("DOWN"), during  # moved by the check
    odd = [answer for answer in probe.answers if answer[2] not in ANSWERS]
    assert set(statuses) <= ANSWERS, (books.server_errors, odd)
    assert books.count("claim", 204) and books.count("delete", 204)
    wait_for(all_up, LIVENESS, "HAProxy did not see every server up again")
    verdict = load.verify(api, providers, books)
    assert verdict.clean, verdict  # every acknowledged write survived both moves
