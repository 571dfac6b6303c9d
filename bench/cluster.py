"""Benchmark: Tally (and upstream Placement) as three API hosts over a 3-node Galera
cluster, each host on its own node and its own address (bin/cluster).

    bench/cluster.py [--servers tally,upstream] [--seconds 75] [--clients 16]
                     [--faults] [--json out.json]

For each server: a fresh database, three hosts (`tally serve --workers 2`; upstream
16.0.0 under gunicorn, 2 workers x 4 threads, from PERF_VENV=/tmp/perf-venv), then
claims + deletes + `reserved` changes from `--clients` clients through one host
(one writer) and through all three (three writers), on disjoint providers and on 4
hot ones; after each run the books are checked (oversubscribed providers, lost
acknowledged writes) and the cluster's certification failures and brute-force aborts
counted; then the coherence probe (claim through one host, candidates through
another right after the acknowledgement). With --faults (Tally only): a Galera node
frozen, killed and cut off under load, how long its host takes to answer 503, what
the other hosts answer meanwhile, and the books after it rejoins.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import cluster_load as load  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CLUSTER = str(REPO / "bin" / "cluster")
NODES = ("db1", "db2", "db3")
HOSTS = ("10.77.0.21", "10.77.0.22", "10.77.0.23")
PORT = 8778
PERF_VENV = Path(os.environ.get("PERF_VENV", "/tmp/perf-venv"))


def cluster(*args: str) -> str:
    """bin/cluster's output; its error output in the exception when it fails."""
    done = subprocess.run([CLUSTER, *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"bin/cluster {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done.stdout


def wait_synced(seconds: float = 180) -> None:
    """Until every Galera node is a synced member of the Primary Component."""
    deadline = time.monotonic() + seconds
    for node in NODES:
        while cluster("status", node).strip() != "Primary Synced ON":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{node} did not rejoin")
            time.sleep(1)


def node_sql(node: str, sql: str) -> str:
    host = {"db1": "10.77.0.11", "db2": "10.77.0.12", "db3": "10.77.0.13"}[node]
    cmd = ["mariadb", f"-h{host}", "-utally", "-ptally", "-N", "-B", "-e", sql]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{node}: {sql}: {done.stderr.strip()}")
    return done.stdout


def conflicts() -> dict[str, int]:
    """Certification failures and brute-force aborts, summed over the nodes."""
    total = {"cert_failures": 0, "bf_aborts": 0}
    for node in NODES:
        out = node_sql(
            node,
            "SHOW GLOBAL STATUS WHERE variable_name IN"
            " ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')",
        )
        for line in out.splitlines():
            name, value = line.split("\t")
            key = "cert_failures" if "cert" in name else "bf_aborts"
            total[key] += int(value)
    return total


class Hosts:
    """Three API hosts of one kind, host i on node i (or all on `via`, a database
    address in front of the nodes: HAProxy's, `bin/cluster url vip`)."""

    def __init__(
        self, kind: str, database: str, logs: Path, url_query: str = "", via: str = ""
    ) -> None:
        self.kind, self.database, self.logs = kind, database, logs
        self.url_query = url_query  # e.g. "?wsrep_sync_wait=0" (Tally's URL only)
        self.via = via  # HOST:PORT
        self.procs: list[subprocess.Popen] = []

    @property
    def urls(self) -> list[str]:
        return [f"http://{host}:{PORT}" for host in HOSTS]

    def node_url(self, i: int, driver: str = "mysql+pymysql") -> str:
        where = self.via or f"10.77.0.1{i + 1}:3306"
        return f"{driver}://tally:tally@{where}/{self.database}"

    def start(self) -> None:
        node_sql("db1", f"DROP DATABASE IF EXISTS {self.database}; CREATE DATABASE {self.database}")
        if self.kind == "upstream":
            env = self._upstream_env(0)
            subprocess.run(
                [str(PERF_VENV / "bin" / "placement-manage"), "db", "sync"], env=env, check=True
            )
        for i, host in enumerate(HOSTS):
            log = open(self.logs / f"{self.kind}-{i + 1}.log", "w")  # noqa: SIM115
            if self.kind == "tally":
                env = dict(
                    os.environ,
                    TALLY_DATABASE_URL=self.node_url(i) + self.url_query,
                    TALLY_HOST=host,
                    TALLY_PORT=str(PORT),
                    TALLY_WORKERS="2",
                    TALLY_AUTH_STRATEGY="noauth",
                    TALLY_NOAUTH_ALLOW_REMOTE="1",
                    TALLY_LOG_LEVEL="WARNING",
                )
                cmd = [str(Path(sys.executable).parent / "tally"), "serve"]
            else:
                env = self._upstream_env(i)
                cmd = [
                    str(PERF_VENV / "bin" / "gunicorn"), "--bind", f"{host}:{PORT}",
                    "--workers", "2", "--worker-class", "gthread", "--threads", "4",
                    "--timeout", "120", "placement.wsgi.api:application",
                ]  # fmt: skip
            self.procs.append(
                subprocess.Popen(cmd, env=env, stdout=log, stderr=log, start_new_session=True)
            )
            self.wait(i)

    def _upstream_env(self, i: int) -> dict[str, str]:
        conf = self.logs / "upstream-conf"
        conf.mkdir(exist_ok=True)
        (conf / "placement.conf").write_text("")
        return dict(
            os.environ,
            OS_PLACEMENT_DATABASE__CONNECTION=self.node_url(i),
            OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP="False",
            OS_API__AUTH_STRATEGY="noauth2",
            OS_PLACEMENT_CONFIG_DIR=str(conf),
            OS_DEFAULT__DEFAULT_LOG_LEVELS="placement=WARNING,placement.requestlog=WARNING",
        )

    def wait(self, i: int, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.urls[i] + "/", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{self.kind} host {i + 1} did not start (see {self.logs})")

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs = []


SCENARIOS = ("disjoint_1w", "disjoint_3w", "hot_1w", "hot_3w")


def scenarios(
    hosts: Hosts, seconds: float, clients: int, only: tuple[str, ...] = SCENARIOS
) -> dict:
    """Each run on providers of its own, so no run starts from another's claims."""
    urls = hosts.urls
    probe = load.seed(urls[0], 1, prefix="probe")[0]
    figures: dict = {}
    for name, through, count, apart in (
        ("disjoint_1w", urls[:1], 48, True),
        ("disjoint_3w", urls, 48, True),
        ("hot_1w", urls[:1], 4, False),
        ("hot_3w", urls, 4, False),
    ):
        if name not in only:
            continue
        providers = load.seed(urls[0], count, prefix=name)
        before = conflicts()
        books, wall = load.run(through, providers, clients=clients, seconds=seconds, disjoint=apart)
        after = conflicts()
        verdict = load.verify(urls[1], providers, books)
        figures[name] = {
            **load.summary(books, wall),
            **{k: after[k] - before[k] for k in after},
            "oversubscribed": len(verdict.oversubscribed),
            "lost": len(verdict.lost_claims) + len(verdict.undeleted),
            "errors": books.server_errors[:3],
        }
        print(name, json.dumps(figures[name]), flush=True)
    stale = [load.coherence_probe(urls[0], urls[b], probe, 75) for b in (1, 2)]
    figures["coherence"] = {"stale": sum(s for s, _ in stale), "probes": sum(n for _, n in stale)}
    print("coherence", json.dumps(figures["coherence"]), flush=True)
    return figures


def first_status(
    url: str, wanted: set[int], limit: float, seen: list | None = None, trait: str = ""
) -> float | None:
    """Seconds until a trait write through `url` answers one of `wanted` (None: not
    within `limit`); a new trait each time unless `trait` names one; `seen` collects
    (status, seconds) of each answer."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        sent = time.monotonic()
        name = trait or f"CUSTOM_PROBE_{time.monotonic_ns()}"
        try:
            status = httpx.put(f"{url}/traits/{name}", headers=load.HEADERS, timeout=limit)
            status = status.status_code
        except httpx.HTTPError:
            status = 0
        if seen is not None:
            seen.append((status, round(time.monotonic() - sent, 2)))
        if status in wanted:
            return round(time.monotonic() - started, 2)
        time.sleep(0.1)
    return None


def faults(hosts: Hosts, clients: int) -> dict:
    """Each fault on db3 under load through all three hosts."""
    urls = hosts.urls
    providers = load.seed(urls[0], 24, prefix="faults")
    results = {}
    for fault, inject, heal in (
        ("freeze", ("freeze", "db3"), ("thaw", "db3")),
        ("partition", ("cut", "db3"), ("join", "db3")),
        ("kill", ("kill", "db3"), ("start", "db3")),
    ):
        done: dict = {}

        def traffic(done: dict = done) -> None:
            done["books"], done["wall"] = load.run(
                urls[:2], providers, clients=clients, seconds=30, disjoint=True
            )

        runner = threading.Thread(target=traffic)
        runner.start()
        time.sleep(3)
        cluster(*inject)
        took = first_status(urls[2], {503}, 10)
        time.sleep(20)
        cluster(*heal)
        recovered_at = time.monotonic()
        hosts.wait(2, 120)
        while True:  # its host takes writes again
            status = httpx.put(f"{urls[2]}/traits/CUSTOM_BACK", headers=load.HEADERS).status_code
            if status < 300 or time.monotonic() - recovered_at > 120:
                break
            time.sleep(0.5)
        back = round(time.monotonic() - recovered_at, 1)
        runner.join()
        books = done["books"]
        verdict = load.verify(urls[0], providers, books)
        results[fault] = {
            "host3_503_after_s": took,
            "host3_writes_again_after_s": back,
            "other_hosts_5xx": books.five_xx,
            "claims_ok": books.count("claim", 204),
            "oversubscribed": len(verdict.oversubscribed),
            "lost": len(verdict.lost_claims) + len(verdict.undeleted),
        }
        print(fault, json.dumps(results[fault]), flush=True)
        wait_synced()  # the cluster whole again before the next fault
    return results


def ensure_upstream() -> None:
    """Upstream Placement 16.0.0 and gunicorn in PERF_VENV (made when missing)."""
    if (PERF_VENV / "bin" / "placement-manage").exists():
        return
    print(f"installing upstream Placement 16.0.0 into {PERF_VENV}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(PERF_VENV)], check=True)
    packages = ["openstack-placement==16.0.0", "gunicorn", "pymysql"]
    subprocess.run([str(PERF_VENV / "bin" / "pip"), "install", "-q", *packages], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="tally,upstream")
    parser.add_argument("--seconds", type=float, default=75)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument(
        "--sync-wait", type=int, help="Tally's wsrep_sync_wait (default: Tally's own, 1)"
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    if cluster("status", "db1").strip() != "Primary Synced ON":
        subprocess.run([CLUSTER, "up", "galera"], check=True)
    if "upstream" in args.servers:
        ensure_upstream()
    logs = Path("/tmp/tally-cluster-bench")
    logs.mkdir(exist_ok=True)
    report: dict = {}
    for kind in args.servers.split(","):
        query = f"?wsrep_sync_wait={args.sync_wait}" if args.sync_wait is not None else ""
        hosts = Hosts(kind, f"bench_{kind}", logs, query if kind == "tally" else "")
        try:
            hosts.start()
            print(f"== {kind}", flush=True)
            only = tuple(args.scenarios.split(","))
            report[kind] = scenarios(hosts, args.seconds, args.clients, only)
            if args.faults and kind == "tally":
                report[kind]["faults"] = faults(hosts, args.clients // 2)
        finally:
            hosts.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    if "tally" in report and "upstream" in report:
        ours, theirs = report["tally"], report["upstream"]
        for name in [n for n in SCENARIOS if n in ours]:
            ratio = ours[name]["writes_per_s"] / max(theirs[name]["writes_per_s"], 0.1)
            print(f"{name}: writes/s tally {ours[name]['writes_per_s']} upstream "
                  f"{theirs[name]['writes_per_s']} ({ratio:.2f}x)")  # fmt: skip
    for kind, figures in report.items():
        if not all(name in figures for name in SCENARIOS):
            continue
        scale = figures["disjoint_3w"]["writes_per_s"] / max(
            figures["disjoint_1w"]["writes_per_s"], 0.1
        )
        hot = figures["hot_3w"]["writes_per_s"] / max(figures["hot_1w"]["writes_per_s"], 0.1)
        print(f"{kind}: three writers / one: disjoint {scale:.2f}x, hot {hot:.2f}x")


if __name__ == "__main__":
    main()
