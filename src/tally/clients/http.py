"""The one way the clients build their httpx.Client: shared headers, auth, TLS and
the transport seam (network, in-process WSGI, or a mock in tests)."""

from __future__ import annotations

import httpx


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
    )
