"""Clustered databases for these tests, started by bin/cluster (root and network
namespaces needed: each node and API host at its own address). They share those
clusters, so they run in one pytest process: `pytest -p no:xdist tests/cluster`, as
bin/test runs them after the rest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLUSTER = str(REPO / "bin" / "cluster")
sys.path.insert(0, str(REPO / "bench"))
from cluster import cluster  # noqa: E402 (bench/cluster.py: the one wrapper of bin/cluster)


def _why_not() -> str | None:
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        return "the cluster tests share one cluster: run them in one process (bin/test does)"
    if os.geteuid() != 0:
        return "the cluster tests need root (network namespaces; CI runs as root)"
    if shutil.which("ip") is None:
        return "the cluster tests need iproute2's `ip` (network namespaces)"
    name = f"tly-probe-{os.getpid()}"
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"network namespaces unavailable here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], check=False)
    return None


_STARTED: list[str] = []  # what this session started (and stops at its end)
FIGURES = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def figures(request: pytest.FixtureRequest) -> list[str]:
    """Lines printed at the end of the run: what the tests measured (never asserted)."""
    return request.config.stash.setdefault(FIGURES, [])


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    lines = config.stash.get(FIGURES, [])
    if lines:
        terminalreporter.section("measured on the cluster")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def cluster_tool() -> Iterator[str]:
    why = _why_not()
    if why:
        pytest.skip(why)
    yield CLUSTER
    if _STARTED:  # a cluster that was up before the session is left up
        subprocess.run([CLUSTER, "down"], check=False)


def _up(kind: str, node: str, healthy: str) -> None:
    """Start the `kind` cluster unless its `node` is `healthy` already."""
    if cluster("status", node).strip() != healthy:
        cluster("up", kind)
        _STARTED.append(kind)


@pytest.fixture(scope="session")
def galera(cluster_tool: str) -> str:
    """A 3-node Galera cluster, db1..db3 (started once per session)."""
    _up("galera", "db1", "Primary Synced ON")
    return cluster_tool


@pytest.fixture(scope="session")
def postgres_pair(cluster_tool: str) -> str:
    """A PostgreSQL primary (pg1) with a synchronous streaming standby (pg2)."""
    _up("pg", "pg1", "primary")
    return cluster_tool
