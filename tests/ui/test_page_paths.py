"""Page paths of any bytes answer the page's own 400 or 404, never a 500 (issue 37, item
6: `/tally/ui/providers/%E2%82%AC` was a 500: the page asked its in-process Placement
for the path's text, which httpx's WSGI transport hands on as text outside Latin-1).

Over the composed server's WSGI app (PATH_INFO as PEP 3333 gives it: the decoded bytes
as Latin-1 text) for odd segments and for any bytes (hypothesis), and over a real
socket for raw and percent-encoded bytes in the request target.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import falcon.testing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tally.config import Settings
from tally.serve.compose import create_server
from tests.live import serving_thread

ODD = [
    b"\xe2\x82\xac",  # U+20AC, outside Latin-1
    b"\xf0\x9f\x98\x80",  # an emoji
    b"\xff",  # not UTF-8
    b"\xc3",  # a UTF-8 sequence cut short
    b"\xed\xa0\x80",  # a surrogate
    b"\x00",
    b"\x1b[31m",
    b"%",
    b"%ZZ",
    b"%E2%82%AC",  # still percent-encoded after one decoding (sent as %25E2...)
    b"not-a-uuid",
    b"12345678-1234-1234-1234-12345678901",
    b"a/b",
    b"",
]
PREFIXES = ["/tally/ui/providers/", "/tally/ui/sandboxes/", "/tally/ui/", "/tally/ui/login/"]
PAGES = {b"/tally/ui/", b"/tally/ui/login", b"/tally/ui/logout"}  # the pages themselves


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tally.db.engine import make_engine
    from tally.placement.ledger.bootstrap import prepare_database

    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('db') / 'tally.sqlite'}")
    prepare_database(engine)
    served = create_server(Settings.of(lab="off"), engine)
    served.engine = engine  # for the in-process client's test
    yield served
    engine.dispose()


def get_raw_path(server, path: bytes) -> falcon.testing.Result:
    """GET with PATH_INFO holding exactly `path` (decoded bytes, as Latin-1 text)."""
    environ = falcon.testing.create_environ(headers={"x-auth-token": "admin"})
    environ["PATH_INFO"] = path.decode("latin-1")
    return falcon.testing.Result(*_call(server, environ))


def _call(app, environ: dict) -> tuple[list[bytes], str, list[tuple[str, str]]]:
    got: dict = {}

    def start_response(status: str, headers: list, exc_info: object = None) -> None:
        got["status"], got["headers"] = status, headers

    body = list(app(environ, start_response))
    return body, got["status"], got["headers"]


def assert_the_pages_own(result: falcon.testing.Result, path: bytes) -> None:
    assert result.status_code in (400, 404), (path, result.status, result.text[:300])
    assert result.headers["content-type"].startswith("text/html"), path
    assert "<html" in result.text.lower(), path


@pytest.mark.parametrize("segment", ODD, ids=repr)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_odd_page_paths_are_the_pages_400_or_404(server, prefix, segment):
    path = prefix.encode() + segment
    if path in PAGES:
        return
    assert_the_pages_own(get_raw_path(server, path), path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segment=st.binary(max_size=40), prefix=st.sampled_from(PREFIXES[:2]))
def test_page_paths_of_any_bytes_are_the_pages_400_or_404(server, segment, prefix):
    path = prefix.encode() + segment
    if path in PAGES:
        return
    assert_the_pages_own(get_raw_path(server, path), path)


SOCKET_TARGETS = [
    b"/tally/ui/providers/%E2%82%AC",
    b"/tally/ui/providers/%FF",
    b"/tally/ui/providers/%C3",
    b"/tally/ui/providers/%ZZ",
    b"/tally/ui/providers/%",
    b"/tally/ui/providers/%00",
    b"/tally/ui/providers/%2F..%2F",
    b"/tally/ui/providers/\xe2\x82\xac",
    b"/tally/ui/providers/\xff",
    b"/tally/ui/%E2%82%AC",
]


@pytest.mark.slow
def test_odd_page_paths_over_a_socket(server):
    """Raw bytes in the request target: the server's own 400 or the page's 400/404."""
    with serving_thread(server) as (url, _):
        parts = urlsplit(url)
        for target in SOCKET_TARGETS:
            request = b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nx-auth-token: admin\r\n"
            with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
                sock.sendall(request + b"Connection: close\r\n\r\n")
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            status = int(answer.split(b" ", 2)[1])
            assert status in (400, 404), (target, answer[:300])


@pytest.mark.parametrize("name", ["€", "\U0001f600", "ÿ", "\ufffd"])
def test_the_in_process_client_hands_any_path_on_as_a_server_would(server, name):
    """The page's client (httpx's WSGI transport) reaches Placement with the path's
    bytes as PEP 3333 Latin-1 text: Placement's 404 naming what was asked."""
    from urllib.parse import quote

    from tally.clients.errors import PlacementError
    from tally.serve.page import in_process_client

    client = in_process_client(Settings.of(lab="off"), server.engine)()
    with pytest.raises(PlacementError) as refused:
        client.get(f"/resource_providers/{quote(name, safe='')}")
    assert refused.value.status == 404
    assert name in refused.value.detail
