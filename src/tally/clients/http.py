"""The one way the clients build their httpx.Client: shared headers, auth, TLS and
the transport seam (network, in-process WSGI, or a mock in tests); and the global
request id a service passes on, as Nova does toward Placement.

A service that calls another in the course of a request of its own (the lab compute
claiming in Placement, as nova-api and nova-compute do) sends its request id as
`X-OpenStack-Request-ID` on every call it makes meanwhile: the other service logs it
beside its own request id (and Tally's claim history keeps it), so one request can
be followed across services. `global_request_id(...)` sets it for the calls of the
current thread or task."""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator

import httpx

HEADER = "X-OpenStack-Request-ID"
GLOBAL_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tally_global_request_id", default=None
)


def new_request_id() -> str:
    """A request id as OpenStack services make them: `req-<uuid>`."""
    return f"req-{uuid.uuid4()}"


@contextlib.contextmanager
def global_request_id(value: str | None) -> Iterator[None]:
    """Send `value` as `X-OpenStack-Request-ID` on the calls made inside."""
    token = GLOBAL_REQUEST_ID.set(value)
    try:
        yield
    finally:
        GLOBAL_REQUEST_ID.reset(token)


def _send_global_request_id(request: httpx.Request) -> None:
    value = GLOBAL_REQUEST_ID.get()
    if value and HEADER not in request.headers:
        request.headers[HEADER] = value


def http_client(
    base_url: str,
    headers: dict[str, str],
    *,
    token: str | None = None,
    auth: httpx.Auth | None = None,
    transport: httpx.BaseTransport | None = None,
    verify: bool | str = True,
    cert: str | tuple[str, str] | None = None,
    timeout: float = 30.0,
) -> httpx.Client:
    """An httpx.Client for one service; a noauth `token` is sent as x-auth-token
    unless an `auth` (keystoneauth) handles tokens. The environment's proxies are
    honoured only on the real network."""
    headers = {"accept": "application/json", **headers}
    if token and auth is None:
        headers["x-auth-token"] = token
    return httpx.Client(
        base_url=base_url.rstrip("/"),
        headers=headers,
        auth=auth,
        transport=transport,
        verify=verify,
        cert=cert,
        timeout=timeout,
        trust_env=transport is None,
        event_hooks={"request": [_send_global_request_id]},
    )
