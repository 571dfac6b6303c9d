"""What request bodies one worker holds at once is bounded (`Limits.bodies`): past
it, the request whose body began arriving longest ago is answered 503 and its
connection closed, so that many slow senders of big bodies cannot fill the disk
with spilled bodies, and a normal request with a body is still answered."""

from __future__ import annotations

import select
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tally.serve import admission
from tally.serve import server as serving
from tests.live import serving_thread, wait_until

pytestmark = pytest.mark.slow

pytestmark = pytest.mark.slow

BOUND = 4 << 20
SENDERS = 12  # each holds 700 KB of a 1 MB body: 8.4 MB in all, twice the bound
HELD = 700_000


def app(environ, start_response):
    body = environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Length", str(len(str(len(body)))))])
    return [str(len(body)).encode()]


def _read_answer(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def holding_a_new_body(seen: list) -> bool:
    """Whether the server holds the whole sent part of a body it did not before (it
    counts a body every 64 KiB); that request is added to `seen`."""
    try:
        held = [r for r in list(admission._holding) if r.body_held >> 16 == HELD >> 16]
    except RuntimeError:  # the server's thread changed the set meanwhile: ask again
        return False
    fresh = [r for r in held if all(r is not s for s in seen)]
    seen.extend(fresh)
    return bool(fresh)


def test_slow_big_bodies_past_the_bound_give_way_oldest_first():
    limits = serving.Limits(threads=2, bodies=BOUND)
    with serving_thread(app, limits) as (url, _server):
        parts = urlsplit(url)
        senders, seen = [], []
        for _ in range(SENDERS):
            sock = socket.create_connection((parts.hostname, parts.port), timeout=5)
            sock.sendall(
                b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n"
                b"Content-Type: application/octet-stream\r\n\r\n" + b"x" * HELD
            )
            senders.append(sock)
            # each begins after the one before: the server holds its body before the next
            assert wait_until(lambda: holding_a_new_body(seen)), len(senders)
        arriving = [r for r in admission._holding if not r.completed]
        assert sum(r.body_held for r in arriving) <= BOUND
        answer = httpx.post(f"{url}/normal", content=b"y" * 200_000, timeout=10)
        assert (answer.status_code, answer.text) == (200, "200000")
        refused = []
        oldest = senders[:4]  # they gave way: their answers arrive (before we half-close)
        assert wait_until(lambda: len(select.select(oldest, [], [], 0)[0]) == len(oldest))
        for sock in oldest:
            sock.shutdown(socket.SHUT_WR)
            refused.append(_read_answer(sock))
        for sock in senders:
            sock.close()
    assert all(a.startswith(b"HTTP/1.1 503 ") for a in refused), refused
    assert all(b"bytes of request bodies at once" in a for a in refused)
