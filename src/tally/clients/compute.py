"""ComputeClient: the compute API (Nova, or the lab's) over the same HTTP layer as
PlacementClient: an `httpx.Client` with a transport seam and a token or an
`httpx.Auth` from a keystoneauth session. Errors carry Nova's error body."""

from __future__ import annotations

from typing import Any

import httpx

from tally.clients.errors import ClientError, Unreachable
from tally.clients.http import http_client

DEFAULT_VERSION = "2.96"
USER_AGENT = "tally-compute-client"


class ComputeError(ClientError):
    """The compute API answered 4xx/5xx: `{"badRequest": {"code", "message"}}`."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        self.method, self.path, self.status, self.detail = method, path, status, message
        super().__init__(f"{message} (HTTP {status}, {method} {path})")

    @classmethod
    def from_response(cls, response: httpx.Response) -> ComputeError:
        message = response.text.strip() or response.reason_phrase
        try:
            body = response.json()
            if isinstance(body, dict) and body:
                inner = next(iter(body.values()))
                if isinstance(inner, dict) and inner.get("message"):
                    message = str(inner["message"])
        except ValueError:
            pass
        request = response.request
        return cls(request.method, request.url.path, response.status_code, message)


class ComputeClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = "admin",
        auth: httpx.Auth | None = None,
        version: str = DEFAULT_VERSION,
        transport: httpx.BaseTransport | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http_client(
            base_url,
            {"user-agent": USER_AGENT, "openstack-api-version": f"compute {version}"},
            token=token,
            auth=auth,
            transport=transport,
            verify=verify,
            cert=cert,
            timeout=timeout,
        )

    def request(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        """One request; the JSON answer (None when empty); ComputeError on 4xx/5xx."""
        try:
            response = self._http.request(method, path, json=json, params=params)
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach the compute API at {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise ComputeError.from_response(response)
        return response.json() if response.content else None

    def get(self, path: str, params: Any = None) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body)

    def put(self, path: str, body: Any = None) -> Any:
        return self.request("PUT", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ComputeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
