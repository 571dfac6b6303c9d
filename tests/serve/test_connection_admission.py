"""A worker at its connection limit makes room for a new connection by closing the
one that waited longest (idle between requests, else still sending its request):
10,000 hostile connections, silent or half-sent, cannot keep a normal request out.
A connection whose request is being answered is never the one closed."""

from __future__ import annotations

import resource
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tally.serve import server as serving
from tests.live import serving_thread

pytestmark = pytest.mark.slow

HOSTILE = 10_000
LIMIT = 50


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = HOSTILE + 1000
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"needs {wanted} open files, the hard limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_hostile_connections_cannot_keep_a_request_out(many_descriptors):
    release, answering = threading.Event(), threading.Event()

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/slow":
            answering.set()
            release.wait(20)  # a request being answered while the flood comes
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    limits = serving.Limits(threads=4, connections=LIMIT)
    with serving_thread(app, limits) as (url, server):
        parts = urlsplit(url)
        address = (parts.hostname, parts.port)
        slow = {}
        busy = threading.Thread(
            target=lambda: slow.setdefault("answer", httpx.get(f"{url}/slow", timeout=30))
        )
        busy.start()
        assert answering.wait(10)
        hostile = []
        try:
            for i in range(HOSTILE):
                sock = socket.create_connection(address, timeout=5)
                if i % 2:  # half of them start a request and never finish it
                    sock.sendall(b"GET /never HTTP/1.1\r\nHost: x\r\n")
                hostile.append(sock)
            answer = httpx.get(f"{url}/normal", timeout=10)
            assert (answer.status_code, answer.text) == (200, "ok")
            assert len(server._map) <= LIMIT + 1  # the listening socket besides them
        finally:
            release.set()
            busy.join(30)
            for sock in hostile:
                sock.close()
        assert slow["answer"].status_code == 200  # the one being answered was kept


def test_the_one_to_go_is_the_longest_idle_then_the_oldest_request():
    class Channel:
        def __init__(self, name, last_activity, started=None, requests=(), out=0):
            self.name, self.last_activity = name, last_activity
            self.request = None if started is None else type("R", (), {"started": started})
            self.requests, self.total_outbufs_len, self.will_close = list(requests), out, False

    from tally.serve.admission import longest_waiting

    busy = Channel("busy", 1.0, requests=["r"])
    sending = Channel("sending", 2.0, out=10)
    idle_old, idle_new = Channel("idle-old", 5.0), Channel("idle-new", 9.0)
    half_old, half_new = Channel("half-old", 0.5, started=3.0), Channel("half-new", 0.1, 8.0)
    everyone = [busy, sending, idle_new, half_new, idle_old, half_old]
    assert longest_waiting(everyone).name == "idle-old"
    assert longest_waiting([busy, sending, half_new, half_old]).name == "half-old"
    assert longest_waiting([busy, sending]) is None
