"""A request whose end two HTTP readers could place differently is refused before
anything after it is read (RFC 9112 section 6.3): behind a proxy that frames by
Content-Length, a request hidden after a chunked body's terminator (or inside a
Content-Length body) would otherwise run on Tally without the proxy ever seeing it.

Each variant of the usual catalogues (CL.TE, TE.CL, TE.TE with whitespace, case,
tab and duplicate tricks, duplicate Content-Length, obs-fold) goes over a raw socket
with a hidden `DELETE` after it; the app must see neither request, the answer is one
JSON 400, and the connection is closed."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.live import serving_thread

pytestmark = pytest.mark.slow

HIDDEN = b"DELETE /resource_providers/hidden HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
CHUNKED_THEN_HIDDEN = b"0\r\n\r\n" + HIDDEN


def _request(*fields: bytes, body: bytes = CHUNKED_THEN_HIDDEN) -> bytes:
    return (
        b"POST /resource_providers HTTP/1.1\r\nHost: x\r\n"
        + b"".join(field + b"\r\n" for field in fields)
        + b"\r\n"
        + body
    )


VARIANTS = {
    "CL.TE": _request(b"Content-Length: 61", b"Transfer-Encoding: chunked"),
    "TE.CL": _request(b"Transfer-Encoding: chunked", b"Content-Length: 3"),
    "TE trailing space": _request(b"Content-Length: 5", b"Transfer-Encoding: chunked "),
    "TE after a tab": _request(b"Content-Length: 5", b"Transfer-Encoding:\tchunked"),
    "TE upper case + CL": _request(b"Content-Length: 5", b"Transfer-Encoding: CHUNKED"),
    "TE twice": _request(b"Transfer-Encoding: chunked", b"Transfer-Encoding: identity"),
    "TE list": _request(b"Transfer-Encoding: gzip, chunked"),
    "TE space before colon": _request(b"Transfer-Encoding : chunked", b"Content-Length: 5"),
    "TE obs-fold": _request(b"Transfer-Encoding: x", b" chunked"),
    "TE x-chunked": _request(b"Transfer-Encoding: xchunked", b"Content-Length: 5"),
    "CL twice, same": _request(b"Content-Length: 5", b"Content-Length: 5"),
    "CL twice, different": _request(b"Content-Length: 0", b"Content-Length: 80", body=HIDDEN),
    "CL list": _request(b"Content-Length: 0, 80", body=HIDDEN),
    "obs-fold elsewhere": _request(b"X-Note: a", b"\tfolded", b"Content-Length: 0", body=HIDDEN),
}  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterable[tuple[str, int, list[str]]]:
    seen: list[str] = []

    def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        seen.append(f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}")
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    with serving_thread(app) as (url, _server):
        parts = urlsplit(url)
        yield parts.hostname, parts.port, seen


def _exchange(host: str, port: int, data: bytes) -> bytes:
    """Send `data`, then read until the server closes (or 5 s pass)."""
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            pytest.fail(f"the connection stayed open after the refusal: {received!r}")
        return received


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_ambiguous_request_is_refused_and_nothing_after_it_runs(server, variant):
    host, port, seen = server
    seen.clear()
    answer = _exchange(host, port, VARIANTS[variant])
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer
    assert answer.count(b"HTTP/1.1 ") == 1  # one answer: the hidden request got none
    assert b"connection: close" in head.lower()
    error = json.loads(body)["errors"][0]
    assert error["status"] == 400 and error["detail"].startswith("Malformed request")
    assert seen == []  # the app saw neither the request nor the one hidden after it


def test_plain_framings_still_work(server):
    host, port, seen = server
    seen.clear()
    chunked = _request(b"Transfer-Encoding: chunked", body=b"2\r\n{}\r\n0\r\n\r\n")
    sized = _request(b"Content-Length: 2", body=b"{}")
    closing = b"GET /done HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = _exchange(host, port, chunked + sized + closing)
    assert answer.count(b"HTTP/1.1 200 ") == 3
    assert seen == ["POST /resource_providers", "POST /resource_providers", "GET /done"]


def test_waitress_is_pinned_to_the_major_version_the_edge_was_written_for():
    """tally.serve.server subclasses waitress's parser, channel and tasks: a new major
    version may change them under us, so pyproject pins it and this checks both."""
    import tomllib
    from importlib.metadata import version
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    wanted = [d for d in project["project"]["dependencies"] if d.startswith("waitress")]
    assert wanted == ["waitress>=3.0,<4"]
    assert version("waitress").split(".")[0] == "3"


OLD_VERSIONS = {
    "HTTP/1.0, kept alive": b"POST /resource_providers HTTP/1.0\r\nConnection: keep-alive\r\n",
    "HTTP/1.0": b"POST /resource_providers HTTP/1.0\r\n",
    "no version": b"POST /resource_providers\r\n",
}


@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_transfer_encoding_outside_http_1_1_is_refused_and_nothing_after_it_runs(server, version):
    """Chunked is HTTP/1.1's: waitress reads an older request's Transfer-Encoding as
    nothing, the request as bodiless, and what a proxy sent as its body as the next
    request. RFC 9112 section 6.1 calls such framing faulty: refused, then closed."""
    host, port, seen = server
    seen.clear()
    sent = OLD_VERSIONS[version] + b"Host: x\r\nTransfer-Encoding: chunked\r\n\r\n" + HIDDEN
    answer = _exchange(host, port, sent)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400", answer
    assert len(re.findall(rb"HTTP/1\.[01] \d{3} ", answer)) == 1  # one answer
    assert b"connection: close" in head.lower()
    error = json.loads(body)["errors"][0]
    assert error["status"] == 400 and "Transfer-Encoding" in error["detail"]
    assert seen == []
