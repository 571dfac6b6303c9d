"""ComputeClient: the compute API (Nova, or the lab's) over the same HTTP layer as
PlacementClient: an `httpx.Client` with a transport seam and a token or an
`httpx.Auth` from a keystoneauth session. Errors carry Nova's error body.

The microversion is negotiated once, lazily, as for Placement: the highest both this
client (2.96) and the server (`version` of its version document) speak, so a Nova
older than 2024.1 is spoken to at what it has. Checks that need a newer microversion
ask `at_least` and say once, through `degraded`, what they could not do."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tally.clients.errors import ClientError, ConfigurationError, Unreachable
from tally.clients.http import http_client

CLIENT_MAX_VERSION = (2, 96)
USER_AGENT = "tally-compute-client"
NO_COMPUTE = (
    "no compute API at {url} ({why}): give the compute endpoint with --compute-url "
    "(env TALLY_COMPUTE_URL), or use --os-cloud with a catalog that lists compute"
)


def parse_version(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text or "")
    if not match:
        raise ConfigurationError(f"compute API version {text!r} is not MAJOR.MINOR (like 2.53)")
    return int(match.group(1)), int(match.group(2))


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
        version: str | None = None,
        transport: httpx.BaseTransport | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._version = None if version in (None, "", "latest") else parse_version(version)
        self.notes: list[str] = []  # what an older compute API could not tell, said once
        self._http = http_client(
            base_url,
            {"user-agent": USER_AGENT},
            token=token,
            auth=auth,
            transport=transport,
            verify=verify,
            cert=cert,
            timeout=timeout,
        )

    # ------------------------------------------------------------ microversions

    @property
    def version(self) -> str:
        major, minor = self._negotiated()
        return f"{major}.{minor}"

    def at_least(self, version: str) -> bool:
        return self._negotiated() >= parse_version(version)

    def degraded(self, version: str, what: str) -> bool:
        """True (and noted once) when the session is older than `version`."""
        if self.at_least(version):
            return False
        note = f"compute API {self.version} lacks {what} (microversion {version})"
        if note not in self.notes:
            self.notes.append(note)
        return True

    def _negotiated(self) -> tuple[int, int]:
        if self._version is None:
            self._version = min(self._server_max(), CLIENT_MAX_VERSION)
        return self._version

    def _server_max(self) -> tuple[int, int]:
        """The `version` of the compute version document (2.0 for a Nova without
        microversions); a clear error when the URL is not a compute API."""
        response = self._send("GET", "/")
        try:
            body = response.json()
        except ValueError:
            body = None
        document = body.get("version") if isinstance(body, dict) else None
        if response.status_code >= 400 or not isinstance(document, dict):
            why = f"HTTP {response.status_code}" if response.status_code >= 400 else "no version"
            raise ConfigurationError(NO_COMPUTE.format(url=self.base_url, why=why))
        return parse_version(document.get("version") or "2.0")

    # ------------------------------------------------------------ requests

    def request(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        """One request at the negotiated microversion; the JSON answer (None when
        empty); ComputeError on 4xx/5xx."""
        headers = {"openstack-api-version": f"compute {self.version}"}
        response = self._send(method, path, json=json, params=params, headers=headers)
        if response.status_code >= 400:
            raise ComputeError.from_response(response)
        return response.json() if response.content else None

    def _send(self, method: str, path: str, **options: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **options)
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach the compute API at {self.base_url}: {exc}") from exc

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
