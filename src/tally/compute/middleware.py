"""Request pipeline of the compute API: request id and log line, microversion, who
is asking (noauth tokens, or the confirmed-identity headers of auth_token or the
lab's token filter), and the error path in Nova's shape."""

from __future__ import annotations

import logging
import re
import time
import uuid

import falcon

from tally.clients.errors import ClientError
from tally.clients.http import GLOBAL_REQUEST_ID
from tally.compute import microversion
from tally.compute.context import Identity
from tally.compute.errors import ComputeFault, Forbidden, NotFound, Unauthorized

request_log = logging.getLogger("tally.requestlog")
log = logging.getLogger("tally.compute")
VERSION_HEADERS = "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
GLOBAL_REQUEST_ID_FORM = re.compile(
    r"^req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$"
)


class RequestIdAndLog:
    """A request id for each request; and, as Nova's context does, the global request
    id its calls to Placement carry (`X-OpenStack-Request-ID`): the caller's, when it
    sent one of the form `req-<uuid>`, else this request's own."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = f"req-{uuid.uuid4()}"
        req.context.started = time.monotonic()
        req.context.version = None
        inbound = req.get_header("x-openstack-request-id") or ""
        forwarded = inbound if GLOBAL_REQUEST_ID_FORM.match(inbound) else None
        req.context.global_token = GLOBAL_REQUEST_ID.set(forwarded or req.context.request_id)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        token = req.context.get("global_token")
        if token is not None:
            GLOBAL_REQUEST_ID.reset(token)
        resp.set_header("x-openstack-request-id", req.context.request_id)
        resp.set_header("x-compute-request-id", req.context.request_id)
        version = req.context.version
        if version is not None:
            resp.set_header("openstack-api-version", f"compute {version}")
            resp.set_header("x-openstack-nova-api-version", str(version))
            resp.set_header("vary", VERSION_HEADERS)
        body = resp.render_body() or b""
        uri = req.root_path + req.path + (f"?{req.query_string}" if req.query_string else "")
        request_log.info(
            '[%s] %s "%s %s" status: %s len: %d microversion: %s',
            req.context.request_id,
            req.remote_addr,
            req.method,
            uri,
            resp.status_code,
            len(body),
            version or "-",
        )


class Microversion:
    """The version asked (at most `maximum`, the lab's cap), and whether the route
    routed to exists at that version (Nova answers 404 where it does not)."""

    def __init__(self, maximum: microversion.Version = microversion.MAX_VERSION) -> None:
        self.maximum = maximum

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.version = microversion.parse(
            req.get_header("openstack-api-version"),
            req.get_header("x-openstack-nova-api-version"),
            self.maximum,
        )

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        if resource is not None and not microversion.served(
            resource, req.method, req.context.version
        ):
            raise NotFound("The resource could not be found.")


class Auth:
    """`noauth`: token `user[:project]` (user `admin` is an admin; `x-roles` and
    `x-project-id` count, as in Placement's noauth). Otherwise the headers auth_token
    (or the lab's token filter) confirmed. The version documents are open."""

    def __init__(self, noauth: bool) -> None:
        self.noauth = noauth

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        if resource is None or getattr(resource, "OPEN", False):
            return
        req.context.identity = self._noauth(req) if self.noauth else self._confirmed(req)
        if getattr(resource, "ADMIN_ONLY", False) and not req.context.identity.is_admin:
            raise Forbidden("Policy doesn't allow this action to be performed.")

    def _noauth(self, req: falcon.Request) -> Identity:
        token = req.get_header("x-auth-token")
        if not token:
            raise Unauthorized("The request you have made requires authentication.")
        user, _, project = token.partition(":")
        roles_header = req.get_header("x-roles")
        roles = (
            _split(roles_header)
            if roles_header is not None
            else (("admin",) if user == "admin" else ())
        )
        return Identity(
            user, req.get_header("x-project-id") or project or user, roles, req.context.request_id
        )

    def _confirmed(self, req: falcon.Request) -> Identity:
        if req.get_header("x-identity-status") != "Confirmed":
            raise Unauthorized("The request you have made requires authentication.")
        return Identity(
            req.get_header("x-user-id") or "",
            req.get_header("x-project-id") or "",
            _split(req.get_header("x-roles") or ""),
            req.context.request_id,
        )


def _split(header: str) -> tuple[str, ...]:
    return tuple(r.strip() for r in header.split(",") if r.strip())


def handle_compute_fault(
    req: falcon.Request, resp: falcon.Response, exc: ComputeFault, params
) -> None:
    resp.status = exc.status
    resp.media = {exc.key: {"code": exc.status, "message": exc.message}}


def handle_client_error(
    req: falcon.Request, resp: falcon.Response, exc: ClientError, params
) -> None:
    """Placement refused or could not be reached: a 500 that says so."""
    log.error("Placement call failed: %s", exc)
    handle_compute_fault(req, resp, ComputeFault(f"Placement: {exc}"), params)


def handle_unexpected(req: falcon.Request, resp: falcon.Response, exc: Exception, params) -> None:
    if isinstance(exc, falcon.HTTPError):
        raise exc
    log.exception("Uncaught exception")
    handle_compute_fault(req, resp, ComputeFault(), params)


def serialize_falcon_error(
    req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError
) -> None:  # noqa: E501
    keys = {400: "badRequest", 404: "itemNotFound", 405: "badMethod", 415: "badMediaType"}
    message = exc.description or exc.title
    resp.content_type = falcon.MEDIA_JSON
    resp.media = {
        keys.get(exc.status_code, "computeFault"): {"code": exc.status_code, "message": message}
    }
