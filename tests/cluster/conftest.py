"""Clustered databases for these tests, started by bin/cluster (root and network
namespaces needed: each node and API host at its own address); every test of this
folder runs in one pytest process (xdist group "cluster")."""

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in str(item.path):
            item.add_marker(pytest.mark.xdist_group("cluster"))


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the cluster tests need root (network namespaces; CI runs as root)"
    if shutil.which("ip") is None:
        return "the cluster tests need iproute2's `ip` (network namespaces)"
    probe = subprocess.run(["ip", "netns", "add", "tly-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"network namespaces unavailable here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", "tly-probe"], check=False)
    return None


_STARTED: list[str] = []  # what this session started (and stops at its end)


@pytest.fixture(scope="session")
def cluster_tool() -> Iterator[str]:
    why = _why_not()
    if why:
        pytest.skip(why)
    yield CLUSTER
    if _STARTED:  # a cluster that was up before the session is left up
        subprocess.run([CLUSTER, "down"], check=False)


def cluster(*args: str) -> str:
    return subprocess.run([CLUSTER, *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="session")
def galera(cluster_tool: str) -> str:
    """A 3-node Galera cluster, db1..db3 (started once per session)."""
    if cluster("status", "db1").strip() != "Primary Synced ON":
        subprocess.run([cluster_tool, "up", "galera"], check=True)
        _STARTED.append("galera")
    return cluster_tool


@pytest.fixture(scope="session")
def postgres_pair(cluster_tool: str) -> str:
    """A PostgreSQL primary (pg1) with a synchronous streaming standby (pg2)."""
    if cluster("status", "pg1").strip() != "primary":
        subprocess.run([cluster_tool, "up", "pg"], check=True)
        _STARTED.append("pg")
    return cluster_tool
