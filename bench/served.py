"""What the benchmarks that ask a real `tally serve` share: a server of one worker on
a SQLite file of its own and a free port, and the serving process's memory and CPU
as /proc tells them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def status_mib(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of /proc/PID/status (VmRSS, VmHWM, ...) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def rss_mib(pid: int) -> float:
    return status_mib(pid, "VmRSS")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tally_serve(
    workdir: str | None = None,
    *,
    database_url: str | None = None,
    workers: int = 1,
    **settings: str,
) -> tuple[subprocess.Popen, str]:
    """`tally serve` of `workers` (noauth, SQLite in `workdir` or `database_url`,
    `settings` as TALLY_<NAME>) on a free port: the process, once it answers, and
    its URL."""
    port = free_port()
    env = dict(os.environ, TALLY_DATABASE_URL=database_url or f"sqlite:///{workdir}/tally.db")
    env["TALLY_AUTH_STRATEGY"] = "noauth"
    env |= {f"TALLY_{name.upper()}": value for name, value in settings.items()}
    tally = Path(sys.executable).with_name("tally")
    proc = subprocess.Popen(
        [str(tally), "serve", "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(400):
        try:
            if httpx.get(f"{base}/", trust_env=False).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.05)
    proc.terminate()
    raise RuntimeError("tally serve did not start")
