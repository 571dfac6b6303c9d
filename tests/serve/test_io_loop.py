"""The I/O loop of a `tally serve` worker (tally.serve.io_loop) with many kept-alive
connections open: a request asks what the busy connections wait for, not every
idle one; idle ones still answer their next request, and are closed when their
client goes or when they stay idle past the limit.

The server runs in a thread of the test (`tests.live.serving_thread`).
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import pytest

from tally.serve import io_loop
from tally.serve import server as serving
from tests.live import serving_thread, wait_until

pytestmark = [
    pytest.mark.skipif(not io_loop.available(), reason="epoll is Linux only"),
    pytest.mark.slow,
]

IDLE = 300
REQUEST = b"GET / HTTP/1.1\r\nHost: tally\r\n\r\n"


def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


def answered(sock: socket.socket) -> bytes:
    """One whole answer of `app` on `sock`."""
    received = b""
    while not received.endswith(b"\r\n\r\n{}"):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed after {received!r}")
        received += chunk
    return received


def kept_alive(url: str, count: int) -> list[socket.socket]:
    """`count` connections that made one request each and stay open, idle."""
    port = int(url.rsplit(":", 1)[1])
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(REQUEST)
        assert answered(sock).startswith(b"HTTP/1.1 200 OK")
        socks.append(sock)
    return socks


@pytest.fixture
def loops(monkeypatch: pytest.MonkeyPatch) -> list[io_loop.EpollLoop]:
    """The I/O loops the servers of the test run, as they start."""
    made: list[io_loop.EpollLoop] = []

    class Seen(io_loop.EpollLoop):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(io_loop, "EpollLoop", Seen)
    return made


def settled(loops: list[io_loop.EpollLoop]) -> bool:
    """The loop waits for a next request on every connection, and asks none of
    them again until its socket has an event."""
    return len(loops) == 1 and not loops[0].unsettled


def test_a_request_does_not_ask_every_idle_connection(monkeypatch, loops):
    asked = [0]
    real_readable = serving._Channel.readable

    def counted(channel: serving._Channel) -> bool:
        asked[0] += 1
        return real_readable(channel)

    monkeypatch.setattr(serving._Channel, "readable", counted)
    with serving_thread(app) as (url, _server):
        idle = kept_alive(url, IDLE)
        try:
            assert wait_until(lambda: settled(loops))
            asked[0] = 0
            with httpx.Client(trust_env=False) as client:
                for _ in range(20):
                    assert client.get(f"{url}/").status_code == 200
            # waitress's own loop asks all 300 on every turn, several turns a request
            # (12,000 and more); this one the busy connection, plus every connection
            # once on a turn where the maintenance ran (at most once a second)
            assert asked[0] < 2 * IDLE + 200, asked[0]
        finally:
            for sock in idle:
                sock.close()


def test_idle_connections_answer_their_next_request(loops):
    with serving_thread(app) as (url, _server):
        idle = kept_alive(url, 50)
        try:
            assert wait_until(lambda: settled(loops))  # no longer asked: only epoll wakes them
            for sock in reversed(idle):
                sock.sendall(REQUEST)
            for sock in idle:
                assert answered(sock).startswith(b"HTTP/1.1 200 OK")
        finally:
            for sock in idle:
                sock.close()


def test_connections_closed_by_their_clients_leave_the_server():
    with serving_thread(app) as (url, server):
        before = len(server._map)
        idle = kept_alive(url, 40)
        assert wait_until(lambda: len(server._map) == before + 40)
        for sock in idle[:25]:
            sock.close()
        assert wait_until(lambda: len(server._map) == before + 15), len(server._map)
        for sock in idle[25:]:
            sock.sendall(REQUEST)
            assert answered(sock).startswith(b"HTTP/1.1 200 OK")
            sock.close()


def test_a_connection_idle_past_the_limit_is_closed():
    limits = dataclasses.replace(serving.Limits(threads=2), idle_seconds=1.0)
    with serving_thread(app, limits) as (url, _server):
        [sock] = kept_alive(url, 1)
        sock.settimeout(10)
        started = time.monotonic()
        assert sock.recv(1) == b""  # the server closed it
        assert time.monotonic() - started < 8
        sock.close()
