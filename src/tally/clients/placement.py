"""PlacementClient: the one HTTP layer to any Placement endpoint (Tally or upstream).

It wraps an `httpx.Client` and takes a transport, so the same code runs over the
network, in-process (`httpx.WSGITransport(app=create_app(...))`) or against a
`httpx.MockTransport` in unit tests. Authentication is a header: Placement's noauth
token (`admin`), a Keystone token given by the operator, or an `httpx.Auth` that
asks a keystoneauth session (see `clients/cloud.py`).

The microversion is negotiated once, lazily: the highest version both this client
(`placement.microversion.NEWEST`) and the server (`max_version` of `GET /`) speak,
unless one is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx

from tally.amounts import held
from tally.clients.errors import (
    ClientError,
    ConfigurationError,
    PlacementError,
    Unreachable,
    VersionUnsupported,
)
from tally.clients.http import http_client
from tally.placement.microversion import NEWEST, as_tuple

CLIENT_MAX_VERSION = as_tuple(NEWEST)
DEFAULT_URL = "http://127.0.0.1:8778"
NOAUTH_ADMIN_TOKEN = "admin"
USER_AGENT = "tally-placement-client"
HISTORY_PATH = "/tally/v1/history"  # Tally's own API (upstream Placement has none)
WHY_PATH = "/tally/v1/allocation_candidates/why"  # Tally's own too
FAILURES_PATH = "/tally/v1/failures"  # Tally's own too

Params = Mapping[str, str | int | list[str] | None]


def parse_version(text: str) -> tuple[int, int]:
    """'1.28' -> (1, 28); ConfigurationError for anything else."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text or "")
    if not match:
        raise ConfigurationError(
            f"placement API version {text!r} is not MAJOR.MINOR (like {NEWEST}) or 'latest'"
        )
    return int(match.group(1)), int(match.group(2))


def format_version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


class PlacementClient:
    """A Placement session: base URL, credentials, microversion, one httpx.Client."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = NOAUTH_ADMIN_TOKEN,
        auth: httpx.Auth | None = None,
        version: str | None = None,
        transport: httpx.BaseTransport | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
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
        self._asked = None if version in (None, "", "latest") else parse_version(version)
        self._version: tuple[int, int] | None = self._asked
        self.notes: list[str] = []  # what this Placement could not tell, said once

    def note(self, text: str) -> None:
        """Say once (`tally.cli.scripting.notes` prints them) what could not be told."""
        if text not in self.notes:
            self.notes.append(text)

    # ------------------------------------------------------------ microversions

    @property
    def version(self) -> str:
        """The microversion every request of this session sends."""
        return format_version(self._negotiated())

    def at_least(self, version: str) -> bool:
        return self._negotiated() >= parse_version(version)

    def require(self, version: str, what: str) -> None:
        """VersionUnsupported unless the session speaks `version` or later."""
        if not self.at_least(version):
            raise VersionUnsupported(
                f"{what} needs placement microversion {version} or later; this session "
                f"uses {self.version} (see --os-placement-api-version)"
            )

    def server_versions(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(min, max) microversions of the server, from its version document."""
        body = _json(self._send("GET", "/", versioned=False))
        versions = body.get("versions") or [body.get("version") or {}]
        document = versions[0] if versions else {}
        low = document.get("min_version") or "1.0"
        high = document.get("max_version") or "1.0"
        return parse_version(low), parse_version(high)

    def _negotiated(self) -> tuple[int, int]:
        if self._version is None:
            _, server_max = self.server_versions()
            self._version = min(server_max, CLIENT_MAX_VERSION)
        return self._version

    # ------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Params | None = None,
    ) -> httpx.Response:
        """Send one request at the session's microversion; PlacementError on 4xx/5xx."""
        return self._send(method, path, json=json, params=params)

    def get(self, path: str, params: Params | None = None) -> Any:
        return _json(self.request("GET", path, params=params))

    def put(self, path: str, body: Any = None) -> Any:
        response = self.request("PUT", path, json=body)
        return _json(response) if response.content else None

    def post(self, path: str, body: Any) -> httpx.Response:
        return self.request("POST", path, json=body)

    def delete(self, path: str) -> None:
        self.request("DELETE", path)

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Params | None = None,
        versioned: bool = True,
    ) -> httpx.Response:
        headers = {}
        if versioned:
            headers["openstack-api-version"] = f"placement {self.version}"
        if params:
            params = {k: v for k, v in params.items() if v not in (None, [], "")}
        try:
            response = self._http.request(
                method, path, json=json, params=params or None, headers=headers
            )
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach Placement at {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise PlacementError.from_response(response)
        return response

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PlacementClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ the reads the doctor uses

    def provider(self, uuid: str) -> dict[str, Any]:
        return self.get(f"/resource_providers/{uuid}")

    def inventories(self, uuid: str) -> dict[str, Any]:
        """`{"resource_provider_generation": N, "inventories": {class: {...}}}`."""
        return self.get(f"/resource_providers/{uuid}/inventories")

    def usages(self, uuid: str) -> dict[str, int]:
        """Used amount per class on the provider."""
        return self.get(f"/resource_providers/{uuid}/usages")["usages"]

    def amounts(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Tally's own `GET /tally/v1/amounts`: provider uuid -> class -> total,
        reserved, allocation_ratio, capacity and used, every provider at once."""
        return self.get("/tally/v1/amounts")["providers"]

    def provider_allocations(self, uuid: str) -> dict[str, dict[str, int]]:
        """consumer uuid -> {class: amount} of what each consumer holds on the provider."""
        body = self.get(f"/resource_providers/{uuid}/allocations")["allocations"]
        return held(body)

    def consumer_allocations(self, consumer: str) -> dict[str, Any]:
        """The body of `GET /allocations/{consumer}`: allocations per provider and, by
        microversion, project_id/user_id (1.12), consumer_generation (1.28),
        consumer_type (1.38). Before 1.12 `allocations` is keyed the same way."""
        return self.get(f"/allocations/{consumer}")

    def history(self, params: Params | None = None) -> dict[str, Any]:
        """Tally's claim history, newest first: `{"history": [change, ...],
        "next_marker": ...}` (query `consumer`, `provider`, `since`, `until`, `limit`,
        `marker`). Admin only; a PlacementError 404 from a Placement without it."""
        return self.get(HISTORY_PATH, params)

    def why(self, params: Params) -> dict[str, Any]:
        """Why a query of allocation candidates finds what it finds (the query as
        GET /allocation_candidates takes it): each constraint and the trees it rules
        out, the closest misses. Admin only; a PlacementError 404 from a Placement
        without it."""
        return self.get(WHY_PATH, params)

    def failures(self, params: Params | None = None) -> dict[str, Any]:
        """Tally's failed searches (GET /allocation_candidates that found nothing),
        newest first: `{"failures": [record, ...], "next_marker": ...}` (query
        `request_id`, `since`, `until`, `resource_class`, `trait`, `limit`, `marker`).
        Admin only; a PlacementError 404 from a Placement without it."""
        return self.get(FAILURES_PATH, params)

    def put_inventories(
        self, uuid: str, generation: int, inventories: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        body = {"resource_provider_generation": generation, "inventories": inventories}
        return self.put(f"/resource_providers/{uuid}/inventories", body)


def _json(response: httpx.Response) -> Any:
    """The JSON body; a ClientError naming the URL when there is none (a wrong --url)."""
    try:
        return response.json()
    except ValueError as exc:
        raise ClientError(
            f"{response.request.method} {response.request.url} answered {response.status_code} "
            "without JSON: is this a Placement endpoint?"
        ) from exc
