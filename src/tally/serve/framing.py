"""Where a request ends, read one way only, and within bounds.

A request whose end two HTTP readers could place differently lets a client hide a
second request where a proxy in front sees only a body (request smuggling). The
server (`tally.serve.server`) asks `ambiguous_framing` of every request's line and
header lines before it reads a byte of the body, and refuses such a request, closing
the connection, so nothing after it is read.

A chunked body is read by `ChunkedBody`, whose framing lines (a chunk's size line
with its extensions, the trailer) are bounded: a line past its bound ends the
request at once, before more of it is read or held.
"""

from __future__ import annotations

import re
from typing import Any

from waitress.rfc7230 import CHUNK_EXT_RE
from waitress.utilities import BadRequest

HEX_SIZE = re.compile(rb"[0-9A-Fa-f]+")


class Refusal(BadRequest):
    """A limit of ours (waitress's own errors say less): `body` is the detail."""


class TrailerTooLarge(Refusal):
    code, reason = 431, "Request Header Fields Too Large"


def ambiguous_framing(request_line: bytes, fields: list[bytes]) -> str | None:
    """Why this request line and these header lines leave the request's end open to
    two readings (RFC 9112 section 6.3: a proxy and this server could split the stream
    differently, and a request hidden in one's body would run on the other): both
    Content-Length and Transfer-Encoding, a Transfer-Encoding other than exactly
    `chunked` or on a request that is not HTTP/1.1 (section 6.1: waitress reads an
    HTTP/1.0 one as bodiless), more than one or a list of Content-Length, a line
    folded onto the one before (obs-fold), or whitespace before a field's colon.
    None when the framing is plain."""
    lengths, encodings = [], []
    for field in fields:
        if not field:
            continue
        if field[:1] in (b" ", b"\t"):
            return "A header field is folded onto the line before it (obs-fold)."
        name, colon, value = field.partition(b":")
        if not colon or name != name.strip(b" \t"):
            return "A header field name is followed by whitespace or has no colon."
        key = name.lower()
        if key == b"content-length":
            lengths.append(value)
        elif key == b"transfer-encoding":
            encodings.append(value)
    if lengths and encodings:
        return "The request has both Content-Length and Transfer-Encoding."
    if encodings and not request_line.endswith(b" HTTP/1.1"):
        return "Transfer-Encoding is refused on a request that is not HTTP/1.1."
    if len(lengths) > 1 or any(b"," in value for value in lengths):
        return "The request has more than one Content-Length."
    if encodings and (len(encodings) > 1 or encodings[0].lstrip(b" ").lower() != b"chunked"):
        return "Transfer-Encoding must be exactly chunked, once."
    return None


class ChunkedBody:
    """A chunked body (RFC 9112 section 7.1), de-chunked into `buf` as it arrives: in
    waitress's parser in place of its `ChunkedReceiver`, which holds a size line or a
    trailer of any length and searches it again whole on every read (a 17 MiB size
    line cost 18 CPU-seconds). Here a line's end is looked for only within its bound,
    and a line past it ends the body in `error` at once: a size line with its
    extensions longer than `line_limit` bytes (400), field lines of the trailer
    longer than `trailer_limit` bytes in all, their CRLFs counted (431). The
    trailer's fields are read and dropped, as waitress does."""

    completed = False
    error: BadRequest | None = None

    def __init__(self, buf: Any, line_limit: int, trailer_limit: int) -> None:
        self.buf = buf  # waitress's OverflowableBuffer
        self.line_limit = line_limit
        self.trailer_limit = trailer_limit
        self.state = "size"  # size -> data -> data end -> size ... -> trailer
        self.pending = b""  # the start of a line whose end has not come yet
        self.remaining = 0  # bytes of the current chunk's data still to come
        self.trailer_held = 0  # bytes of trailer field lines read

    def __len__(self) -> int:
        return len(self.buf)

    def getfile(self) -> Any:
        return self.buf.getfile()

    def getbuf(self) -> Any:
        return self.buf

    def received(self, data: bytes) -> int:
        """Take what `data` holds of this body: how many bytes were taken (what
        follows the body is the next request's)."""
        at = 0
        while at < len(data) and not self.completed:
            if self.state == "data":
                taken = data[at : at + self.remaining]
                self.buf.append(taken)
                at += len(taken)
                self.remaining -= len(taken)
                if not self.remaining:
                    self.state = "data end"
                continue
            line, at = self._line(data, at)
            if line is not None:
                self._take(line)
        return at

    def _room(self) -> int:
        """Bytes the line being read may have before its CRLF."""
        if self.state == "size":
            return self.line_limit
        if self.state == "trailer":
            return max(self.trailer_limit - self.trailer_held - 2, 0)
        return 0  # "data end": the CRLF after a chunk's data, nothing before it

    def _line(self, data: bytes, at: int) -> tuple[bytes | None, int]:
        """The next whole line from `data[at:]` (after what is pending), without its
        CRLF, and where `data` goes on; None when its end has not come yet (or the
        line is refused)."""
        room = self._room()
        window = at + room + 2 - len(self.pending)  # the LF of a line within its room
        end = data.find(b"\n", at, window)
        if end < 0:  # (no more than the window is kept: past it, the line is too long)
            self.pending += data[at:window]
            if len(self.pending) - self.pending.endswith(b"\r") > room:
                self._refuse_long()
            return None, len(data)
        line, self.pending = self.pending + data[at:end], b""
        if not line.endswith(b"\r"):
            self._fail("A chunk framing line ends in a bare LF.")
            return None, end + 1
        return line[:-1], end + 1

    def _take(self, line: bytes) -> None:
        if self.state == "size":
            size, semicolon, extensions = line.partition(b";")
            if not HEX_SIZE.fullmatch(size):
                self._fail("Invalid chunk size.")
            elif semicolon and not CHUNK_EXT_RE.match(semicolon + extensions):
                self._fail("Invalid chunk extension.")
            elif int(size, 16):
                self.state, self.remaining = "data", int(size, 16)
            else:
                self.state = "trailer"
        elif self.state == "data end":
            self.state = "size"  # (the line is empty: its room was 0)
        elif not line:
            self.completed = True  # the empty line after the trailer
        elif b":" not in line or b"\r" in line:
            self._fail("A trailer line is not a header field.")
        else:
            self.trailer_held += len(line) + 2

    def _refuse_long(self) -> None:
        if self.state == "size":
            self._fail(f"A chunk-size line is longer than {self.line_limit} bytes.")
        elif self.state == "data end":
            self._fail("A chunk's data is longer than its size.")
        else:
            message = f"The chunked body's trailer is longer than {self.trailer_limit} bytes."
            self.error, self.completed = TrailerTooLarge(message), True

    def _fail(self, why: str) -> None:
        self.error, self.completed = BadRequest(why), True
