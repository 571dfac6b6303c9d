"""`tally serve` reads whole requests before a thread runs them (tally.serve.server).

Against a real `tally serve` process: 200 connections that sent half a request
(part of the request line, headers without their end, a body cut short, chunks cut
short) hold no thread, so ordinary requests keep answering at once, with one worker
and with two; chunked bodies are read; requests past the server's limits get
Placement's JSON error body; a request that does not arrive in time gets a 408.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tally.serve import server as serving
from tests.live import tally_process, wait_until

pytestmark = pytest.mark.slow

ADMIN = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
IDLE_CONNECTIONS = 200
FAST = 1.0  # seconds: a normal request with 200 idle connections open (it takes ms)

HALF_SENT = [
    b"GET /resource_provi",
    b"GET /resource_providers HTTP/1.1\r\nHost: tally\r\nx-auth-token: admin\r\n",
    b"POST /resource_providers HTTP/1.1\r\nHost: tally\r\nx-auth-token: admin\r\n"
    b'content-type: application/json\r\ncontent-length: 100\r\n\r\n{"name": ',
    b"POST /resource_providers HTTP/1.1\r\nHost: tally\r\nx-auth-token: admin\r\n"
    b'content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"nam',
]


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def open_half_sent(port: int, count: int) -> list[socket.socket]:
    socks = []
    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(HALF_SENT[i % len(HALF_SENT)])
        socks.append(sock)
    return socks


def read_by_the_server(port: int, socks: list[socket.socket]) -> bool:
    """Whether the server on `port` accepted each of `socks` and read all they sent:
    the server's end of each connection is in the kernel's table (/proc/net/tcp)
    with nothing left in its receive queue."""
    ours = {sock.getsockname()[1] for sock in socks}
    unread: dict[int, int] = {}
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            local, remote, state, queues = line.split()[1:5]
            if state == "01" and int(local.split(":")[1], 16) == port:  # ESTABLISHED
                unread[int(remote.split(":")[1], 16)] = int(queues.split(":")[1], 16)
    return all(unread.get(client) == 0 for client in ours)


def still_open(sock: socket.socket) -> bool:
    """Nothing answered and nothing closed: the server is still waiting for the rest."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def timed_requests(url: str, count: int) -> list[float]:
    """Seconds each of `count` GET /resource_providers took (a new connection each)."""
    times = []
    no_keepalive = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(headers=ADMIN, timeout=10, trust_env=False, limits=no_keepalive) as client:
        for _ in range(count):
            started = time.monotonic()
            answer = client.get(f"{url}/resource_providers")
            times.append(time.monotonic() - started)
            assert answer.status_code == 200
    return times


def raw_request(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `data` as is; the status, headers and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
            head, _, body = received.partition(b"\r\n\r\n")
            headers = dict(
                line.decode("latin-1").lower().split(": ", 1) for line in head.split(b"\r\n")[1:]
            )
            if len(body) >= int(headers.get("content-length", -1)) >= 0:
                break
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def chunked(body: bytes, size: int = 7) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data = tmp_path_factory.mktemp("serve")
    with tally_process(data) as (url, _proc):
        yield url, data / "serve.log"


# ---------------------------------------------------------------- slow clients


@pytest.mark.parametrize("workers", [1, 2])
def test_200_half_sent_requests_do_not_stop_normal_requests(tmp_path, workers):
    with tally_process(tmp_path, workers=str(workers)) as (url, proc):
        quiet = timed_requests(url, 20)
        idle = open_half_sent(port_of(url), IDLE_CONNECTIONS)
        try:
            assert wait_until(lambda: read_by_the_server(port_of(url), idle), 30)
            times = timed_requests(url, 20)
            name = f"under-load-{uuid.uuid4().hex[:8]}"
            created = httpx.post(
                f"{url}/resource_providers", json={"name": name}, headers=ADMIN, trust_env=False
            )
            assert created.status_code == 200, created.text
            print(
                f"\n{workers} worker(s), GET /resource_providers (ms, median/worst): "
                f"{_ms(quiet)} alone, {_ms(times)} with {IDLE_CONNECTIONS} half-sent open"
            )
            assert max(times) < FAST
            assert all(still_open(sock) for sock in idle)  # waited for, not dropped
        finally:
            for sock in idle:
                sock.close()
        if workers > 1:
            assert_a_dead_worker_is_replaced(url, proc)


def _ms(times: list[float]) -> str:
    return f"{sorted(times)[len(times) // 2] * 1000:.1f}/{max(times) * 1000:.1f}"


def assert_a_dead_worker_is_replaced(url: str, proc: subprocess.Popen) -> None:
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    workers = children.read_text().split()
    assert len(workers) == 2
    os.kill(int(workers[0]), signal.SIGKILL)

    def replaced() -> bool:
        now = children.read_text().split()
        return len(now) == 2 and workers[0] not in now

    assert wait_until(replaced, 30, every=0.2), children.read_text()
    assert max(timed_requests(url, 5)) < 10


# ---------------------------------------------------------------- chunked bodies


def test_a_chunked_post_creates_a_provider(server):
    url, _log = server
    name = f"chunked-{uuid.uuid4().hex[:8]}"
    body = json.dumps({"name": name}).encode()
    status, headers, answer = raw_request(
        port_of(url),
        b"POST /resource_providers HTTP/1.1\r\nHost: tally\r\nx-auth-token: admin\r\n"
        b"openstack-api-version: placement 1.39\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n" + chunked(body),
    )
    assert status == 200, answer
    assert json.loads(answer)["name"] == name
    found = httpx.get(
        f"{url}/resource_providers", params={"name": name}, headers=ADMIN, trust_env=False
    )
    assert [rp["name"] for rp in found.json()["resource_providers"]] == [name]


def test_a_streamed_body_of_unknown_length_is_read(server):
    """httpx sends a generator body chunked, as a client streaming its body would."""
    url, _log = server
    name = f"streamed-{uuid.uuid4().hex[:8]}"

    def body() -> Iterator[bytes]:
        yield b'{"name": '
        yield json.dumps(name).encode()
        yield b"}"

    answer = httpx.post(
        f"{url}/resource_providers",
        content=body(),
        headers={**ADMIN, "content-type": "application/json"},
        trust_env=False,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["name"] == name


# ---------------------------------------------------------------- limits


def _fields(count: int, size: int = 10) -> bytes:
    return b"".join(b"x-field-%d: %s\r\n" % (i, b"v" * size) for i in range(count))


HEAD = b"GET /resource_providers HTTP/1.1\r\nHost: tally\r\nx-auth-token: admin\r\n"
BIG_BODY = b'{"name": "' + b"x" * (1024 * 1024) + b'"}'
PAST_LIMITS = {
    "request line": (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: tally\r\n\r\n", 414),
    "too many header fields": (HEAD + _fields(120) + b"\r\n", 431),
    "one header field too long": (HEAD + b"x-big: " + b"v" * 9000 + b"\r\n\r\n", 431),
    "headers too large": (HEAD + _fields(90, 1000) + b"\r\n", 431),
    "body too large": (
        HEAD + b"content-type: application/json\r\ncontent-length: 2000000\r\n\r\n",
        413,
    ),
    "chunked body too large": (
        b"POST /resource_providers HTTP/1.1\r\nHost: tally\r\nx-auth-token: admin\r\n"
        b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        + chunked(BIG_BODY, 65536),
        413,
    ),
    "malformed header": (HEAD + b"this is no header\r\n\r\n", 400),
    "malformed chunks": (
        b"POST /resource_providers HTTP/1.1\r\nHost: tally\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        400,
    ),
}


@pytest.mark.parametrize("case", list(PAST_LIMITS))
def test_requests_past_the_server_limits_get_placement_errors(server, case):
    url, log = server
    data, status = PAST_LIMITS[case]
    answer_status, headers, body = raw_request(port_of(url), data)
    assert answer_status == status
    assert headers["content-type"] == "application/json"
    (error,) = json.loads(body)["errors"]
    assert set(error) == {"status", "title", "detail", "code", "request_id"}
    assert error["status"] == status
    assert error["code"] == "placement.undefined_code"
    assert error["request_id"] == headers["openstack-request-id"]
    assert error["detail"]
    # the request log's line is written once the answer is sent: wait for it
    assert wait_until(lambda: f"[{error['request_id']}] 127.0.0.1 " in log.read_text())


def test_a_body_of_exactly_the_limit_reaches_the_app(server):
    url, _log = server
    body = b" " * (1024 * 1024 - 2) + b"{}"  # 1 MiB, max_body_bytes' default
    status, _headers, answer = raw_request(
        port_of(url),
        b"POST /resource_providers HTTP/1.1\r\nHost: tally\r\nx-auth-token: admin\r\n"
        b"openstack-api-version: placement 1.39\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n" + chunked(body, 65536),
    )
    assert status == 400  # the app's schema check: no name
    assert b"'name' is a required property" in answer


# ---------------------------------------------------------------- the read deadline


def test_a_request_not_received_in_time_gets_a_408():
    """In-process, with a short deadline: the request line and headers, or the body,
    must all arrive within `read_seconds` of the first byte."""

    def app(environ, start_response):  # noqa: ANN001, ANN202
        start_response("200 OK", [("content-type", "text/plain")])
        return [environ["wsgi.input"].read()]

    sock = serving.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = serving.make_server(app, sock, serving.Limits(read_seconds=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        for data in (HALF_SENT[1], HALF_SENT[2]):
            status, headers, body = raw_request(port, data)
            assert status == 408
            assert headers["connection"] == "close"
            assert json.loads(body)["errors"][0]["title"] == "Request Timeout"
        assert time.monotonic() - started < 10
        complete = b"POST / HTTP/1.0\r\ncontent-length: 2\r\n\r\nok"
        status, _headers, body = raw_request(port, complete)
        assert (status, body) == (200, b"ok")
    finally:
        server.task_dispatcher.shutdown()
        server.close()
