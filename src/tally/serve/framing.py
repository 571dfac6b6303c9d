"""Where a request ends, read one way only.

A request whose end two HTTP readers could place differently lets a client hide a
second request where a proxy in front sees only a body (request smuggling). The
server (`tally.serve.server`) asks `ambiguous_framing` of every request's line and
header lines before it reads a byte of the body, and refuses such a request, closing
the connection, so nothing after it is read.
"""

from __future__ import annotations


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
