"""Request pipeline: the request's budget of database waits, request id, request log,
microversion, auth, content negotiation, policy, the input domain of paths and query
strings. (CORS is in cors.py.)

Falcon runs every `process_response` even after an error, so headers that must be on
every answer (request id, microversion echo, `vary`) are added there.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import falcon

from tally import counts
from tally.db import deadline
from tally.placement import microversion, policy
from tally.placement.context import Identity
from tally.placement.error_responses import RETRY_AFTER_SECONDS
from tally.placement.error_types import (
    BadRequest,
    MethodNotAllowed,
    NotAcceptable,
    PayloadTooLarge,
    ServiceUnavailable,
    Unauthorized,
    UriTooLong,
)
from tally.placement.ledger import history_records as history
from tally.placement.schemas import domain

request_log = logging.getLogger("tally.requestlog")

UNAUTHENTICATED_PATHS = frozenset({"/", ""})
# The environ key where the edge (tally.serve.keystone) says why the identity service
# could not validate the request's token: a 503, not the caller's fault.
KEYSTONE_UNREACHABLE = "tally.keystone_unreachable"
# What oslo.middleware's request_id accepts as a caller's global request id.
GLOBAL_REQUEST_ID = re.compile(
    r"^req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$"
)


class DatabaseWaits:
    """Each request's one budget for waiting on a database that does not answer
    (`tally.db.deadline`): a frozen server costs it one read timeout, then a 503,
    not one timeout per connect, ping and statement."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.database_waits = deadline.begin()

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        token = getattr(req.context, "database_waits", None)
        if token is not None:
            deadline.end(token)


class RequestIdAndLog:
    """Gives each request an id and writes Placement's request log line. A caller's
    `X-OpenStack-Request-ID` of the form `req-<uuid>` (nova sends its own) is kept as
    the global request id, as oslo.middleware and oslo.context keep it upstream (any
    other value is ignored); the line ends with it and the caller's user and project."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = f"req-{uuid.uuid4()}"
        inbound = req.get_header("x-openstack-request-id") or ""
        req.context.global_request_id = inbound if GLOBAL_REQUEST_ID.fullmatch(inbound) else None
        req.context.started = time.monotonic()
        req.context.version = None

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        request_id = req.context.request_id
        resp.set_header("openstack-request-id", request_id)
        resp.set_header("x-openstack-request-id", request_id)
        version = req.context.version
        if version is not None:
            resp.set_header(microversion.HEADER, microversion.header_value(version))
            resp.append_header("vary", microversion.HEADER)
        # The app has no default media type: a body is JSON unless a handler said
        # otherwise, and an empty answer (201 before 1.20, 204) carries no content-type.
        if resp.stream is not None:  # (sent as it is joined: its length said before)
            length = int(resp.content_length or 0)
        else:
            has_body = resp.media is not None or resp.text is not None or resp.data is not None
            if has_body and not resp.content_type:
                resp.content_type = falcon.MEDIA_JSON
            length = len(resp.render_body() or b"")
            if not length:
                resp.content_type = None
        uri = req.relative_uri if req.query_string else req.root_path + req.path
        line = '[%s] %s "%s %s" status: %s len: %d'
        args = [request_id, req.remote_addr, req.method, uri, resp.status_code, length]
        if version is not None:
            line += " microversion: %s.%s"
            args += [version.major, version.minor]
        identity = getattr(req.context, "identity", None)
        line += " global_request_id: %s user: %s project: %s"
        args += [
            req.context.global_request_id or "-",
            (identity.user_id if identity else None) or "-",
            (identity.project_id if identity else None) or "-",
        ]
        request_log.info(line, *args)
        counts.request(
            req.uri_template or "-",
            req.method,
            resp.status_code,
            time.monotonic() - req.context.started,
            req.context.get("error"),
        )


class HistoryScope:
    """Who the writes of this request are done for, as the claim history records
    them (`ledger.history.CALLER`, read in the write's transaction): the request id,
    the caller's global request id, user and project, and whether the history is on.
    Set once routing found the resource (the identity is known by then), and put
    back after the answer; a write request then pokes the history's pruner."""

    WRITES = frozenset({"PUT", "POST", "DELETE", "PATCH"})

    def __init__(self, record: bool, pruner: history.Pruner | None = None) -> None:
        self.record = record
        self.pruner = pruner

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        identity = getattr(req.context, "identity", None)
        caller = history.Caller(
            req.context.request_id,
            req.context.global_request_id,
            identity.user_id if identity else None,
            identity.project_id if identity else None,
            self.record,
        )
        req.context.history_token = history.CALLER.set(caller)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        token = req.context.get("history_token")
        if token is not None:
            history.CALLER.reset(token)
        if self.pruner is not None and req.method in self.WRITES:
            self.pruner.poke()


class Microversion:
    """Parses `OpenStack-API-Version` into `req.context.version`."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            req.context.version = microversion.parse(req.get_header(microversion.HEADER))
        except microversion.MicroversionError as exc:
            if exc.status == 406:
                raise NotAcceptable(
                    str(exc),
                    max_version=".".join(map(str, microversion.MAX_VERSION)),
                    min_version=".".join(map(str, microversion.MIN_VERSION)),
                ) from None
            raise BadRequest(str(exc)) from None


Header = Callable[[str], str | None]  # a request's header by name (None: absent)


def noauth_identity(header: Header) -> Identity:
    """Upstream's noauth2: token `user[:project]`, user `admin` is an admin,
    `x-roles` sets roles explicitly. As there, the headers a Keystone-aware
    proxy would set also count: `x-project-id` names the project, and
    `openstack-system-scope: all` makes a system-scoped (project-less) token."""
    token = header("x-auth-token")
    if not token:
        raise Unauthorized("The request you have made requires authentication.")
    user_id, _, project_id = token.partition(":")
    roles_header = header("x-roles")
    if roles_header is not None:
        roles = _split(roles_header)
    else:
        roles = ("admin",) if user_id == "admin" else ()
    system_scope = header("openstack-system-scope") or None
    token_project = None if system_scope else project_id or user_id
    return Identity(
        user_id,
        header("x-project-id") or token_project,
        roles,
        system_scope=system_scope,
        domain_id=header("x-domain-id") or None,
    )


def confirmed_identity(header: Header, env: Mapping[str, Any]) -> Identity:
    """Identity from the headers keystonemiddleware's auth_token (or the lab's
    token filter) confirmed. A token Keystone could not be asked about (the edge
    sets KEYSTONE_UNREACHABLE in `env`) is 503 with `retry-after`, as upstream
    answers."""
    if env.get(KEYSTONE_UNREACHABLE):
        raise ServiceUnavailable(
            "The identity service (Keystone) could not be reached to validate the "
            f"token; retry in {RETRY_AFTER_SECONDS} seconds.",
            **{"retry-after": str(RETRY_AFTER_SECONDS)},
        )
    if header("x-identity-status") != "Confirmed":
        raise Unauthorized("The request you have made requires authentication.")
    return Identity(
        header("x-user-id") or "",
        header("x-project-id") or None,
        _split(header("x-roles") or ""),
        system_scope=header("openstack-system-scope") or None,
        domain_id=header("x-domain-id") or None,
    )


def identify(auth_strategy: str, header: Header, env: Mapping[str, Any]) -> Identity:
    """The caller as the auth mode reads it: noauth's token, or (keystone, lab)
    the headers auth_token or the lab's token filter confirmed. Placement's
    identity middlewares and the operator page's gate both ask this."""
    if auth_strategy == "noauth":
        return noauth_identity(header)
    return confirmed_identity(header, env)


class NoAuth:
    """Who is asking, by `noauth_identity`; the version document is open."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.path in UNAUTHENTICATED_PATHS:
            return
        req.context.identity = noauth_identity(req.get_header)


class KeystoneIdentity:
    """Who is asking, by `confirmed_identity`: the headers keystonemiddleware's
    auth_token sets (it strips any the client sent). auth_token runs with
    `delay_auth_decision`, so the version document stays open and this decides;
    a 401 from here still gets auth_token's `www-authenticate` header."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.path in UNAUTHENTICATED_PATHS:
            return
        req.context.identity = confirmed_identity(req.get_header, req.env)


def _answers(req: falcon.Request, resource: object) -> bool:
    """Whether the resource's own responder answers this request: not a method
    the route lacks (405), nor one outside its microversion range (404)."""
    responder = getattr(resource, f"on_{req.method.lower()}", None)
    gate = getattr(responder, "version_gate", None)
    return responder is not None and (gate is None or gate(req.context.version))


def _split(header: str) -> tuple[str, ...]:
    return tuple(r.strip() for r in header.split(",") if r.strip())


class Authorize:
    """Asks the policy about the rule the resource names for the method
    (`POLICIES = {"GET": "placement:..."}`), once routing has found it. A method the
    route lacks (405) or a microversion the responder refuses (404) is answered
    first, as upstream checks policy inside the handler. `POLICY_TARGET_QUERY`
    names query parameters that make the policy target (GET /usages: project_id)."""

    def __init__(self, enforcer: policy.Policy) -> None:
        self.policy = enforcer

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        rule = getattr(resource, "POLICIES", {}).get(req.method)
        if rule is None or not _answers(req, resource):
            return
        target = None
        names = getattr(resource, "POLICY_TARGET_QUERY", ())
        if names:
            values = {name: req.params.get(name) for name in names}
            target = {k: v[-1] if isinstance(v, list) else v for k, v in values.items()}
        self.policy.authorize(req.context.identity, rule, target)


class ContentNegotiation:
    """406 for an Accept we cannot satisfy; 400 for a body without a type;
    413 for an oversized body; 414 for an oversized query string. The 415
    check is in `read_json`, since some PUTs take no body."""

    def __init__(self, max_body_bytes: int, max_query_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.max_query_bytes = max_query_bytes

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if len(req.query_string) > self.max_query_bytes:
            raise UriTooLong(f"Query string is longer than {self.max_query_bytes} bytes.")

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        if resource is None:
            return
        if req.method == "OPTIONS" and not hasattr(resource, "on_options"):
            allowed = sorted(
                m[3:].upper()
                for m in dir(resource)
                if m.startswith("on_") and m.count("_") == 1 and m != "on_options"
            )
            raise MethodNotAllowed(
                "The method OPTIONS is not allowed for this resource.", allow=", ".join(allowed)
            )
        # As upstream, only GETs that answer with a document check Accept; a
        # write with `accept: text/plain` still runs (its errors come as text).
        accept = req.get_header("accept") if req.method == "GET" else None
        if req.path in UNAUTHENTICATED_PATHS:
            accept = None
        if accept and accept.strip() != "*/*" and not req.client_accepts("application/json"):
            raise NotAcceptable("Only application/json is provided")
        length = req.content_length
        if length and req.method in ("GET", "HEAD", "DELETE"):
            raise BadRequest(f"A {req.method} request does not take a body.")
        if length and length > 0 and not req.content_type:
            raise BadRequest("content-type header required when content-length > 0")
        if length and length > self.max_body_bytes:
            raise PayloadTooLarge(f"Request body is larger than {self.max_body_bytes} bytes.")


class InputDomain:
    """Paths and query strings within the input domain (`schemas.domain`): valid
    UTF-8 without NUL characters (400 naming the parameter), and the provider
    or consumer uuid in the path in canonical form (`{uuid}`, `{consumer_uuid}`),
    so every spelling of one uuid reaches the same row. Runs once routing has
    found the responder, after policy, as upstream checks input in the handler."""

    UUID_PARAMS = ("uuid", "consumer_uuid")

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        if resource is None or not _answers(req, resource):
            return
        raw_path = req.env.get("PATH_INFO", "")  # bytes tunnelled as latin-1 (PEP 3333)
        if not raw_path.isascii():
            try:
                raw_path.encode("latin-1").decode("utf-8")
            except UnicodeError:
                raise BadRequest(f"Invalid path: not valid UTF-8. Got: {req.path!r}") from None
        for name, value in params.items():
            domain.check_text(value, f"path parameter {name!r}")
            if name in self.UUID_PARAMS:
                params[name] = domain.canonical_uuid(value)
        if not req.query_string:
            return
        try:
            urllib.parse.unquote_to_bytes(req.query_string).decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(
                "Invalid query string parameters: the query string is not valid UTF-8."
            ) from None
        for key, values in falcon.uri.parse_query_string(
            req.query_string, keep_blank=True, csv=False
        ).items():
            domain.check_text(key, "query string parameter name")
            for value in values if isinstance(values, list) else [values]:
                domain.check_text(value, f"query string parameter {key!r}")
