"""How `tally serve` puts an answer on the wire (tally.serve.server): the response header
and a small first body block leave in one send, a big body after its header, and
every byte arrives in order whatever the app's blocks.

The server runs in a thread of the test (`tests.live.serving_thread`); `sent`
records what each send of the server's connections put on the socket.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx
import pytest

from tally.serve import server as serving
from tests.live import serving_thread

pytestmark = pytest.mark.slow

Answer = tuple[str, list[tuple[str, str]], list[bytes]]


@contextlib.contextmanager
def served(answer: Answer) -> Iterator[tuple[str, list[bytes]]]:
    """A server answering every request with `answer`: its URL and the sends made."""
    status, headers, blocks = answer

    def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        start_response(status, headers)
        return iter(blocks)

    sent: list[bytes] = []
    real_send = serving._Channel.send

    def recording_send(channel: serving._Channel, data: bytes, do_close: bool = True) -> int:
        count = real_send(channel, data, do_close)
        sent.append(bytes(data[:count]))
        return count

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serving._Channel, "send", recording_send)
        with serving_thread(app) as (url, _server):
            yield url, sent


def json_answer(body: bytes, status: str = "200 OK") -> Answer:
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    return status, headers, [body]


def test_a_small_answer_leaves_in_one_send():
    body = b'{"resource_providers":[]}'
    with served(json_answer(body)) as (url, sent):
        answer = httpx.get(f"{url}/resource_providers", trust_env=False)
    assert answer.status_code == 200 and answer.content == body
    assert len(sent) == 1
    assert sent[0].startswith(b"HTTP/1.1 200 OK\r\n") and sent[0].endswith(b"\r\n\r\n" + body)


def test_an_answer_without_a_body_sends_its_header():
    with served(("204 No Content", [], [])) as (url, sent):
        answer = httpx.delete(f"{url}/allocations/x", trust_env=False)
    assert answer.status_code == 204 and answer.content == b""
    assert len(sent) == 1 and sent[0].startswith(b"HTTP/1.1 204 No Content\r\n")
    assert sent[0].endswith(b"\r\n\r\n")


def test_head_sends_the_header_alone():
    # (as falcon answers HEAD: the headers of the GET, no body block)
    headers = [("Content-Type", "application/json"), ("Content-Length", "8")]
    with served(("200 OK", headers, [])) as (url, sent):
        answer = httpx.head(f"{url}/", trust_env=False)
    assert answer.status_code == 200 and answer.headers["content-length"] == "8"
    assert len(sent) == 1 and sent[0].endswith(b"\r\n\r\n")


def test_a_big_body_follows_its_header_whole():
    body = b"[" + b"0," * serving.JOIN_HEADER_BELOW + b"0]"
    with served(json_answer(body)) as (url, sent):
        answer = httpx.get(f"{url}/resource_providers", trust_env=False)
    assert answer.content == body
    assert sent[0].startswith(b"HTTP/1.1 200 OK\r\n") and sent[0].endswith(b"\r\n\r\n")
    assert b"".join(sent[1:]) == body


def test_blocks_after_the_first_arrive_in_order_on_a_kept_connection():
    blocks = [b"[1,", b"2,", b"3]"]
    answer = ("200 OK", [("Content-Type", "application/json")], blocks)
    with served(answer) as (url, sent), httpx.Client(trust_env=False) as client:
        first = client.get(f"{url}/a")
        second = client.get(f"{url}/b")
    assert first.content == second.content == b"[1,2,3]"
    # per answer: the header with the first (chunked) block, then each further block
    # and the last chunk; the two answers each start a send of their own
    starts = [i for i, data in enumerate(sent) if data.startswith(b"HTTP/1.1 200 OK")]
    assert len(starts) == 2
    assert sent[starts[0]].endswith(b"\r\n\r\n3\r\n[1,\r\n")
