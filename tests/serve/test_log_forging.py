"""Nothing a client sends can write a line of its own into the log: a request line
with a bare LF (refused 400 by the server) and a header quoted in a log message come
out with their control characters escaped, on the one line of their record."""

from __future__ import annotations

import io
import logging
import socket
from urllib.parse import urlsplit

import pytest

from tally.serve.logs import FORMAT, OneLineFormatter, one_line
from tests.live import serving_thread

pytestmark = pytest.mark.slow

FORGED = '2026-12-03 10:00:00,000 INFO tally.requestlog [req-x] 10.0.0.1 "DELETE /x" status: 204'


def test_a_message_with_line_breaks_stays_one_line():
    record = logging.LogRecord(
        "tally", logging.INFO, __file__, 1, "name %s", (f"a\n{FORGED}",), None
    )
    text = OneLineFormatter(FORMAT).format(record)
    assert "\n" not in text and text.endswith(f"name a\\x0a{FORGED}")
    assert one_line("tab\there\r\x00\x1b[2J\x85\u2028") == (
        "tab\\x09here\\x0d\\x00\\x1b[2J\\x85\\u2028"
    )


def test_a_refused_request_line_cannot_forge_a_log_line():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter(FORMAT))
    requestlog = logging.getLogger("tally.requestlog")
    requestlog.addHandler(handler)
    level = requestlog.level
    requestlog.setLevel(logging.INFO)

    def app(environ, start_response):
        start_response("200 OK", [("Content-Length", "0")])
        return [b""]

    try:
        with serving_thread(app) as (url, _server):
            parts = urlsplit(url)
            line = f"GET /a\n{FORGED} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
                sock.sendall(line)
                answer = sock.recv(65536)
    finally:
        requestlog.removeHandler(handler)
        requestlog.setLevel(level)
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n")[0]
    logged = stream.getvalue().splitlines()
    assert len(logged) == 1, logged  # the refusal's own line, and no other
    assert "status: 400" in logged[0] and "\\x0a" in logged[0]
