"""The one error path: Placement's error document, rendered as the client's Accept
asks (JSON, or webob-style html/plain text as upstream), for our typed errors, for
Falcon's own (no route: 404, wrong method: 405), for a database that cannot be
reached (503 with `retry-after`), and for requests the server refuses before the app
(`server_error_document`, used by tally.serve.server)."""

from __future__ import annotations

import html
import logging

import falcon

from tally.db.retry import unavailable
from tally.placement import errors as codes
from tally.placement.error_types import TallyError

RETRY_AFTER_SECONDS = 5  # what a 503 for an unreachable database or Keystone asks to wait
RESPONSE_HEADERS = frozenset({"allow", "retry-after"})  # a TallyError's extras sent as headers


def error_document(
    req: falcon.Request, status: int, title: str, detail: str, code: str, **extra: str
) -> dict:
    """Placement's error body. The one place it is built."""
    version = getattr(req.context, "version", None)
    with_code = version is not None and version >= (1, 23)
    request_id = getattr(req.context, "request_id", None)
    return _document(status, title, detail, code if with_code else None, request_id, extra)


def server_error_document(status: int, title: str, detail: str, request_id: str) -> dict:
    """The body of a request the server refused before the app read a microversion
    (request line, headers or body past the server's limits): every field."""
    return _document(status, title, detail, codes.DEFAULT, request_id, {})


def _document(
    status: int, title: str, detail: str, code: str | None, request_id: str | None, extra: dict
) -> dict:
    error: dict = {"status": status, "title": title, "detail": detail}
    if code is not None:
        error["code"] = code
    if request_id:
        error["request_id"] = request_id
    error.update(extra)
    return {"errors": [error]}


def _accept_quality(ranges: list[tuple[str, float]], offer: str) -> float:
    """q of the most specific Accept range matching `offer` (0 when none does)."""
    kind = offer.split("/")[0]
    best, quality = -1, 0.0
    for media, q in ranges:
        rank = 2 if media == offer else 1 if media == f"{kind}/*" else 0 if media == "*/*" else -1
        if rank > best:
            best, quality = rank, q
    return quality


def error_format(req: falcon.Request) -> str:
    """As upstream (webob): errors are JSON when the client sends no Accept or
    `*/*`; otherwise the better of text/html and JSON by q (html on a tie),
    else plain text."""
    accept = (req.get_header("accept") or "").strip()
    if not accept or accept == "*/*":
        return falcon.MEDIA_JSON
    ranges = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        ranges.append((media.lower(), q))
    html_q, json_q = (_accept_quality(ranges, o) for o in ("text/html", "application/json"))
    if max(html_q, json_q) <= 0:
        return falcon.MEDIA_TEXT
    return falcon.MEDIA_HTML if html_q >= json_q else falcon.MEDIA_JSON


def render_error(req: falcon.Request, resp: falcon.Response, document: dict) -> None:
    """The error document as JSON, or as the html/plain page webob would give."""
    media = error_format(req)
    resp.content_type = media
    if media == falcon.MEDIA_JSON:
        resp.media = document
        return
    error = document["errors"][0]
    status = f"{error['status']} {error['title']}"
    if media == falcon.MEDIA_HTML:
        resp.text = (
            f"<html>\n <head>\n  <title>{html.escape(status)}</title>\n </head>\n <body>\n"
            f"  <h1>{html.escape(status)}</h1>\n  {html.escape(error['detail'])}\n"
            " </body>\n</html>"
        )
    else:
        resp.text = f"{status}\n\n{error['detail']}"


def handle_tally_error(
    req: falcon.Request, resp: falcon.Response, exc: TallyError, params: dict
) -> None:
    req.context.error = exc  # for the request's metrics (tally.serve.metrics)
    headers = {k: v for k, v in exc.extra.items() if k in RESPONSE_HEADERS}
    body_extra = {k: v for k, v in exc.extra.items() if k not in headers}
    resp.status = exc.status
    for name, value in headers.items():
        resp.set_header(name, value)
    render_error(
        req, resp, error_document(req, exc.status, exc.title, exc.detail, exc.code, **body_extra)
    )


def serialize_falcon_error(
    req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError
) -> None:
    """Falcon's own errors (no route: 404, wrong method: 405) in Placement's shape."""
    detail = exc.description or exc.title
    if exc.status_code == 405:
        detail = f"The method {req.method} is not allowed for this resource."
        allowed = [m.strip() for m in (resp.get_header("allow") or "").split(",")]
        resp.set_header("allow", ", ".join(m for m in allowed if m and m != "OPTIONS"))
    elif exc.status_code == 404 and not exc.description:
        detail = "The resource could not be found."
    title = exc.title
    if title.split(" ", 1)[0].isdigit():  # falcon titles are status lines: "404 Not Found"
        title = title.split(" ", 1)[1]
    render_error(req, resp, error_document(req, exc.status_code, title, detail, codes.DEFAULT))


def handle_unexpected(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict):
    if isinstance(exc, falcon.HTTPError):
        raise exc
    if unavailable(exc):
        # Not a bug: the database is down, restarting, refusing connections or locked.
        # The engine reconnects by itself once it is back (db.engine._ping_when_idle).
        logging.getLogger("tally.placement").error(
            "Database unavailable: %s", str(getattr(exc, "orig", None) or exc).strip()
        )
        resp.status = 503
        resp.set_header("retry-after", str(RETRY_AFTER_SECONDS))
        detail = (
            "The database is unavailable (down, restarting or busy); "
            f"retry in {RETRY_AFTER_SECONDS} seconds."
        )
        render_error(
            req, resp, error_document(req, 503, "Service Unavailable", detail, codes.DEFAULT)
        )
        return
    logging.getLogger("tally.placement").exception("Uncaught exception")
    handle_tally_error(req, resp, TallyError("An unexpected error occurred."), params)
