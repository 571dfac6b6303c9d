"""What a chunked body's framing may hold is bounded (`Limits.chunk_line`,
`Limits.trailer`), and a request past a bound is refused as soon as the bound is
passed, before more of it is read: a chunk-size line (with its extensions) longer
than a few hundred bytes is a 400, a trailer longer than a few KiB a 431, each with
Placement's error body, and the connection is closed. Unbounded, one such line of
17 MiB cost the I/O loop 18 CPU-seconds (the line was searched again on every read)
and 300 connections holding 1 MiB each kept 210 MiB of the worker's memory.

Each case goes over a raw socket to the real server in a thread of the test: the
request's framing is sent *without* the end of the line or trailer, so a server
that waits for it never answers (the socket's timeout fails the test), and one that
answers has refused it at once."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import pytest
from waitress.buffers import OverflowableBuffer

from tally.serve.framing import ChunkedBody
from tests.live import serving_thread

pytestmark = pytest.mark.slow

HEAD = b"POST /resource_providers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
LINE = 256  # bytes of a chunk-size line and its extensions: `Limits.chunk_line`
TRAILER = 8192  # bytes of a trailer's field lines: `Limits.trailer`


@pytest.fixture(scope="module")
def server() -> Iterable[tuple[str, int, list[bytes]]]:
    bodies: list[bytes] = []

    def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        bodies.append(environ["wsgi.input"].read())
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    with serving_thread(app) as (url, _server):
        parts = urlsplit(url)
        yield parts.hostname, parts.port, bodies


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; the test fails if the server
    waits instead (5 s)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        pytest.fail(f"no refusal: the server waits for more ({received!r})")
    except ConnectionResetError:
        pass  # closed with our unread bytes in its buffer: what it sent came first
    return received


def _exchange(host: str, port: int, data: bytes) -> bytes:
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(data)
        return _answer(sock)


def _error(answer: bytes, status: int) -> dict[str, Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer
    assert answer.count(b"HTTP/1.1 ") == 1
    assert b"connection: close" in head.lower()
    (error,) = json.loads(body)["errors"]
    assert set(error) == {"status", "title", "detail", "code", "request_id"}
    assert error["status"] == status and error["code"] == "placement.undefined_code"
    return error


UNFINISHED = {
    "chunk-size line": (b"0" * (LINE + 1), 400),  # leading zeros: a valid size, if it ended
    "chunk extension": (b"1;name=" + b"v" * LINE, 400),
    "chunk-size line after a chunk": (b"2\r\n{}\r\n" + b"0" * (LINE + 1), 400),
    "trailer field": (b"0\r\nx-checksum: " + b"v" * TRAILER, 431),
    "trailer fields": (b"0\r\n" + b"x-t: v\r\n" * (TRAILER // 8 + 1), 431),
}


@pytest.mark.parametrize("case", UNFINISHED)
def test_an_unfinished_line_past_its_bound_is_refused_at_once(server, case):
    host, port, bodies = server
    bodies.clear()
    framing, status = UNFINISHED[case]
    error = _error(_exchange(host, port, HEAD + framing), status)
    bound = LINE if status == 400 else TRAILER
    assert f"longer than {bound} bytes" in error["detail"]
    assert bodies == []


FINISHED = {
    "chunk extension": b"2;name=" + b"v" * LINE + b"\r\n{}\r\n0\r\n\r\n",
    "trailer": b"2\r\n{}\r\n0\r\nx-checksum: " + b"v" * TRAILER + b"\r\n\r\n",
}


@pytest.mark.parametrize("case", FINISHED)
def test_a_whole_line_past_its_bound_is_refused_too(server, case):
    """Sent in one piece (the line's end in the same read): still past the bound."""
    host, port, bodies = server
    bodies.clear()
    status = 431 if case == "trailer" else 400
    _error(_exchange(host, port, HEAD + FINISHED[case]), status)
    assert bodies == []


def test_lines_within_their_bounds_are_read_as_before(server):
    host, port, bodies = server
    bodies.clear()
    within = (
        b"2;name=" + b"v" * (LINE - 7) + b"\r\n{}\r\n"  # the line: exactly LINE bytes
        b'00000003;a;b="q"\r\n[1]\r\n0\r\nx-checksum: '
        + b"v" * (TRAILER - 25)  # the trailer's two lines: exactly TRAILER bytes
        + b"\r\nx-more: 1\r\n\r\n"
    )
    closing = b"GET /done HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = _exchange(host, port, HEAD + within + closing)
    assert answer.count(b"HTTP/1.1 200 ") == 2, answer
    assert bodies == [b"{}[1]", b""]


def test_the_server_stops_reading_a_long_line_at_its_bound(server):
    """A client sending a 17 MiB chunk-size line gets its 400 after the first reads,
    and the rest of its line is never read: the server closes the connection and
    the client's sending fails, where a server that kept reading would take it all."""
    host, port, bodies = server
    bodies.clear()
    sent: list[BaseException | None] = []
    with socket.create_connection((host, port), timeout=5) as sock:

        def send() -> None:
            try:
                sock.sendall(HEAD + b"0" * (17 << 20))
                sent.append(None)
            except OSError as error:
                sent.append(error)

        sender = threading.Thread(target=send)
        sender.start()
        answer = _answer(sock)
        sender.join(30)
    _error(answer, 400)
    assert sent and isinstance(sent[0], (BrokenPipeError, ConnectionResetError)), sent


# ---------------------------------------------------------------- the reader alone

WELL_FRAMED = b'7;a=1;b="q r"\r\n{"a": 1\r\n0000001\r\n}\r\n0\r\nx-one: 1\r\nx-two: 2\r\n\r\nNEXT'


@pytest.mark.parametrize("piece", [1, 2, 3, 5, 8, len(WELL_FRAMED)])
def test_a_body_split_anywhere_reads_the_same(piece):
    """Every line end may fall between two reads (the CR in one, the LF in the next)."""
    body = ChunkedBody(OverflowableBuffer(1 << 20), LINE, TRAILER)
    taken = 0
    for start in range(0, len(WELL_FRAMED), piece):
        taken += body.received(WELL_FRAMED[start : start + piece])
        if body.completed:
            break
    assert (body.completed, body.error) == (True, None)
    assert WELL_FRAMED[taken:].startswith(b"NEXT")  # what follows is the next request's
    assert body.getfile().read() == b'{"a": 1}'


def test_nothing_past_the_bound_is_held():
    """A 1 MiB size line, read as the server reads (8 KiB at a time): refused at the
    first read, holding no more than the bound and its CRLF."""
    body = ChunkedBody(OverflowableBuffer(1 << 20), LINE, TRAILER)
    assert body.received(b"0" * 8192) == 8192
    assert body.completed and body.error.code == 400
    assert len(body.pending) <= LINE + 2 and len(body) == 0
