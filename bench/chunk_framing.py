#!/usr/bin/env python3
"""What hostile chunked framing costs a `tally serve` worker (issue 37, item 3).

Starts `tally serve` (one worker, a fresh SQLite file, noauth) on a private port,
then, over raw sockets:

- one request whose chunk-size line is 17 MiB of `0` (a valid size, if it ever
  ended), and one whose trailer is 17 MiB: the seconds until the answer and its
  status, and the worker's CPU seconds spent on it;
- 300 connections each sending a 1 MiB chunk-size line and staying open: the
  worker's resident memory (VmRSS) before, while they are open, and two seconds
  after they are closed.

  .venv/bin/python bench/chunk_framing.py
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from served import cpu_seconds, rss_mib, tally_serve

HEAD = b"POST /resource_providers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
MIB = 1 << 20


def start(workdir: str) -> tuple[subprocess.Popen, int]:
    proc, base = tally_serve(workdir)
    return proc, int(base.rsplit(":", 1)[1])


def send_hostile(port: int, data: bytes, timeout: float = 120) -> tuple[float, str]:
    """Send `data` from a thread; the seconds until the answer's status line came
    (or the server closed), and that line."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:

        def send() -> None:
            try:
                sock.sendall(data)
            except OSError:
                pass  # the server closed without reading the rest: what we hope for

        started = time.perf_counter()
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answer = b""
        try:
            while b"\r\n" not in answer and (chunk := sock.recv(4096)):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
        seconds = time.perf_counter() - started
        sender.join(timeout)
    return seconds, answer.split(b"\r\n", 1)[0].decode("latin-1") or "(closed, no answer)"


def open_line(port: int, size: int) -> socket.socket:
    """A connection that sent the head and a `size`-byte chunk-size line, left open."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    try:
        sock.sendall(HEAD + b"0" * size)
    except OSError:
        pass  # refused and closed by the server
    return sock


def wait_idle(pid: int, seconds: float = 300) -> float:
    """When the worker stopped working (under 2% of a CPU for a second): the
    kernel holds what a client sent until the worker reads it."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        cpu = cpu_seconds(pid)
        time.sleep(1)
        if cpu_seconds(pid) - cpu < 0.02:
            return time.perf_counter() - 1
    return time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--line-mib", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        proc, port = start(workdir)
        try:
            cases = {
                "17 MiB chunk-size line": HEAD + b"0" * (17 * MIB),
                "17 MiB trailer": HEAD + b"0\r\nx-t: " + b"v" * (17 * MIB),
            }
            for label, data in cases.items():
                cpu = cpu_seconds(proc.pid)
                seconds, status = send_hostile(port, data)
                time.sleep(0.5)  # (the worker's CPU is read once it settled)
                spent = cpu_seconds(proc.pid) - cpu
                print(
                    f"{label:<24} answered in {seconds:7.3f} s: {status}; worker CPU {spent:.2f} s"
                )
            time.sleep(2)
            before = rss_mib(proc.pid)
            size = int(args.line_mib * MIB)
            started = time.perf_counter()
            with ThreadPoolExecutor(32) as pool:
                socks = list(pool.map(lambda _: open_line(port, size), range(args.connections)))
            settled = wait_idle(proc.pid) - started
            held = rss_mib(proc.pid)
            for sock in socks:
                sock.close()
            time.sleep(2)
            after = rss_mib(proc.pid)
            print(
                f"{args.connections} connections x {args.line_mib:g} MiB chunk-size line "
                f"(read by {settled:.1f} s): worker RSS {before:.0f} MiB before, {held:.0f} MiB "
                f"with them open, {after:.0f} MiB 2 s after they closed"
            )
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
