"""`/healthcheck`, in oslo.middleware's healthcheck shape, open without a token (for
load balancers): the database answering `SELECT 1` is healthy, and on a Galera node
that node being ready, in the Primary Component and synced.

GET: 200 and `OK` (text/plain) or 503 and the reason; with `Accept: application/json`
oslo's JSON reply, `{"detailed": false, "reasons": [...]}`, and its detailed form (the
database backend, how long it took or why it failed, Python, platform, gc, thread
stacks) for an admin token only. HEAD: 204 or 503, no body (as oslo.middleware).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import gc
import io
import json
import platform
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa

from tally.db import damage, probe
from tally.db.cluster import cluster_state
from tally.db.engine import ping

# A load balancer's check has a timeout of its own (often 2-5 s): a database that
# does not answer (a frozen node) is reported unhealthy within this, while the ping
# itself runs on to its own timeout in one of a few threads kept for it.
ANSWER_SECONDS = 2.0
_ASKING = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="health")


_TEXT = {"schema": {"type": "string"}}
_ANSWER = {"text/plain": _TEXT, "application/json": {"schema": {"type": "object"}}}
# Its path item in /openapi.json (tally.placement.openapi.Document's `beside`): served
# at the root whatever the document's prefix (`servers`), and open without a token.
OPENAPI: dict[str, Any] = {
    "servers": [{"url": "/"}],
    "get": {
        "operationId": "get_healthcheck",
        "description": "For load balancers, open without a token: 200 and `OK` while the "
        "database answers (on Galera: this node ready, in the Primary Component, synced), "
        "503 and the reason otherwise; with `Accept: application/json` oslo.middleware's "
        "body, detailed for an admin token.",
        "security": [],
        "responses": {
            "200": {"description": "OK", "content": _ANSWER},
            "503": {"description": "Service Unavailable", "content": _ANSWER},
        },
    },
    "head": {
        "operationId": "head_healthcheck",
        "description": "As GET, with no body.",
        "security": [],
        "responses": {
            "204": {"description": "No Content"},
            "503": {"description": "Service Unavailable"},
        },
    },
}


class Healthcheck:
    def __init__(self, engine: sa.Engine, auth_strategy: str) -> None:
        self.engine = engine
        self.auth_strategy = auth_strategy

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if environ.get("PATH_INFO", "") not in ("", "/") or method not in ("GET", "HEAD"):
            allow = [("Allow", "GET, HEAD")] if method not in ("GET", "HEAD") else []
            start_response(
                "405 Method Not Allowed" if allow else "404 Not Found",
                [("Content-Type", "text/plain"), ("Content-Length", "0"), *allow],
            )
            return [b""]
        healthy, reason, details = self.check()
        if method == "HEAD":
            if healthy:
                start_response("204 No Content", [])
            else:
                start_response(
                    "503 Service Unavailable",
                    [("Content-Type", "text/plain"), ("Content-Length", "0")],
                )
            return [b""]
        status = "200 OK" if healthy else "503 Service Unavailable"
        if _wants_json(environ.get("HTTP_ACCEPT", "")):
            body = self.json_body(reason, details, self.is_admin(environ))
            content_type = "application/json"
        else:
            body, content_type = reason, "text/plain"
        data = body.encode()
        start_response(
            status,
            [
                ("Content-Type", f"{content_type}; charset=UTF-8"),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "no-cache"),
            ],
        )
        return [data]

    def check(self) -> tuple[bool, str, str]:
        backend = self.engine.url.get_backend_name()
        asked = _ASKING.submit(lambda: (ping(self.engine), cluster_state(self.engine)))
        try:
            took, unready = asked.result(timeout=ANSWER_SECONDS)
        except concurrent.futures.TimeoutError:
            why = f"no answer within {ANSWER_SECONDS:g} s"
            return False, "database unavailable", f"{backend}: {why}"
        except sa.exc.SQLAlchemyError as exc:
            why = probe.reason(exc) if isinstance(exc, sa.exc.DBAPIError) else str(exc)
            return False, "database unavailable", f"{backend}: {why}"
        if unready:
            return False, "database node unready", f"{backend}: {unready}"
        damaged = damage.recent(self.engine)
        if damaged:
            return False, "database damaged", f"{backend}: {damaged}"
        return True, "OK", f"{backend} answered SELECT 1 in {took:.1f} ms"

    def json_body(self, reason: str, details: str, detailed: bool) -> str:
        if not detailed:
            return json.dumps({"detailed": False, "reasons": [reason]}, indent=4, sort_keys=True)
        body = {
            "detailed": True,
            "python_version": sys.version,
            "now": str(datetime.datetime.now(datetime.UTC).replace(tzinfo=None)),
            "platform": platform.platform(),
            "gc": {"counts": gc.get_count(), "threshold": gc.get_threshold()},
            "reasons": [{"reason": reason, "details": details, "class": "DatabaseCheck"}],
            "greenthreads": [],
            "threads": _thread_stacks(),
        }
        return json.dumps(body, indent=4, sort_keys=True)

    def is_admin(self, environ: dict[str, Any]) -> bool:
        return is_admin(environ, self.auth_strategy)


def is_identified(environ: dict[str, Any], auth_strategy: str) -> bool:
    """Whether the caller is anyone at all: auth_token's (or the lab filter's)
    confirmed identity, or under noauth a token (as Placement's noauth, which
    answers 401 to a request without one)."""
    if auth_strategy != "noauth" or environ.get("HTTP_X_IDENTITY_STATUS"):
        return environ.get("HTTP_X_IDENTITY_STATUS") == "Confirmed"
    return bool(environ.get("HTTP_X_AUTH_TOKEN"))


def is_admin(environ: dict[str, Any], auth_strategy: str) -> bool:
    """An admin as Placement would see one: auth_token's (or the lab filter's)
    confirmed identity, or under noauth the token `admin` or `x-roles: admin`."""
    roles_header = environ.get("HTTP_X_ROLES")
    roles = {r.strip() for r in (roles_header or "").split(",")}
    if auth_strategy != "noauth" or environ.get("HTTP_X_IDENTITY_STATUS"):
        return environ.get("HTTP_X_IDENTITY_STATUS") == "Confirmed" and "admin" in roles
    token = environ.get("HTTP_X_AUTH_TOKEN", "")
    if not token:
        return False
    return "admin" in roles if roles_header is not None else token.partition(":")[0] == "admin"


def _wants_json(accept: str) -> bool:
    """oslo's order of offers: text/plain, text/html, application/json; the best
    quality wins, ties go to the earlier offer."""
    best: tuple[float, int] = (0.0, 0)
    chosen = "text/plain"
    order = {"text/plain": 3, "text/html": 2, "application/json": 1}
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        for offer, rank in order.items():
            if q > 0 and kind in (offer, offer.split("/")[0] + "/*", "*/*"):
                if (q, rank) > best:
                    best, chosen = (q, rank), offer
    return chosen == "application/json"


def _thread_stacks() -> list[str]:
    stacks = []
    for frame in sys._current_frames().values():
        buf = io.StringIO()
        traceback.print_stack(frame, file=buf)
        stacks.append(buf.getvalue())
    return stacks
