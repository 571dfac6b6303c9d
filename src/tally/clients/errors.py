"""Errors of the HTTP clients: what a server refused, and what never reached one.

ClientError                 anything the client could not do
+-- ConfigurationError      no usable endpoint or credentials (bad --os-cloud, ...)
+-- Unreachable             the server did not answer (connection refused, timeout)
+-- VersionUnsupported      the command needs a microversion the session does not speak
+-- BadInput                what the caller named is not there (a server, a provider)
+-- PlacementError          the server answered 4xx/5xx; carries its error body
+-- GaveUp                  what we wrote kept changing: every attempt lost its race
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from tally.placement.errors import DEFAULT as UNDEFINED_CODE  # a leaf: codes only
from tally.placement.errors import INVENTORY_IN_USE

SCHEMA_WORDS = "JSON does not validate: "
_SCHEMA_TAIL = re.compile(r"\.?\s*Failed validating .*", re.S)  # Tally's one line, upstream's dump
_INSTANCE = re.compile(r"On instance((?:\[[^\]]*\])+)")


class ClientError(Exception):
    """Something the client could not do; `str()` is the message for an operator."""


class ConfigurationError(ClientError):
    pass


class Unreachable(ClientError):
    pass


class VersionUnsupported(ClientError):
    pass


class BadInput(ClientError):
    """What the caller asked about names nothing there (`tally heal --instance` of a
    server the compute API does not have): bad input, as nova-manage counts it."""


class GaveUp(ClientError):
    """What we wrote kept changing under us: every attempt lost the generation race
    (`tally.clients.races`)."""


class PlacementError(ClientError):
    """A refusal from the server: its status, Placement error code (from 1.23),
    title, detail, request id, and any extra members of the error object (Tally's
    capacity guard adds `usage`: per class used/capacity/consumers)."""

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        title: str = "",
        detail: str = "",
        code: str | None = None,
        request_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.method, self.path, self.status = method, path, status
        self.title, self.detail, self.code = title, detail, code
        self.request_id = request_id
        self.extra = extra or {}
        super().__init__(self.message())

    @property
    def usage(self) -> list[dict[str, Any]] | None:
        """Tally's per-class account of an inventory refusal, when the server sent one."""
        usage = self.extra.get("usage")
        return usage if isinstance(usage, list) else None

    @property
    def inventory_in_use(self) -> bool:
        """The server refused an inventory change because allocations hold it
        (the code from 1.23; before that, upstream's words)."""
        if self.code == INVENTORY_IN_USE:
            return True
        return self.status == 409 and "in use" in self.detail and "Inventory for" in self.detail

    def message(self) -> str:
        """For an operator: the server's title and its detail (a schema refusal as
        the field and what is wrong with it, not the validator's words), then the
        status, its code (unless `placement.undefined_code`, which says nothing),
        the request and its id."""
        code = f" {self.code}" if self.code and self.code != UNDEFINED_CODE else ""
        facts = [f"HTTP {self.status}{code}", f"{self.method} {self.path}"]
        if self.request_id:
            facts.append(f"request {self.request_id}")
        detail = readable(self.detail)
        said = detail if detail.startswith(self.title) else f"{self.title}: {detail}"
        return f"{said} ({', '.join(facts)})"

    @classmethod
    def from_response(cls, response: httpx.Response) -> PlacementError:
        """Read Placement's error body `{"errors": [{status, title, detail, code,
        request_id, ...}]}`; anything else becomes the detail as text."""
        request = response.request
        first: dict[str, Any] = {}
        try:
            body = response.json()
            errors = body.get("errors") if isinstance(body, dict) else None
            if isinstance(errors, list) and errors and isinstance(errors[0], dict):
                first = errors[0]
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
        known = {"status", "title", "detail", "code", "request_id"}
        return cls(
            request.method,
            request.url.raw_path.decode("ascii", "replace"),
            response.status_code,
            title=str(first.get("title") or response.reason_phrase),
            detail=str(first.get("detail") or response.text.strip() or response.reason_phrase),
            code=first.get("code"),
            request_id=first.get("request_id") or response.headers.get("openstack-request-id"),
            extra={k: v for k, v in first.items() if k not in known},
        )


def readable(detail: str) -> str:
    """A schema refusal (`JSON does not validate: MESSAGE. Failed validating ...
    On instance['inventories']['VCPU']['total']`, Tally's one line or upstream's
    dump of the schema) as `inventories.VCPU.total: MESSAGE`; any other detail as
    it is."""
    if not detail.startswith(SCHEMA_WORDS):
        return detail
    message = _SCHEMA_TAIL.sub("", detail[len(SCHEMA_WORDS) :]).strip().rstrip(".")
    where = _INSTANCE.search(detail)
    if where is None:
        return message
    keys = re.findall(r"\[([^\]]*)\]", where.group(1))
    field = "".join(f"[{k}]" if k.isdigit() else f".{k.strip(chr(39))}" for k in keys)
    return f"{field.lstrip('.')}: {message}"
