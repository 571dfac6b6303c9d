"""Typed errors of the API, raised alike by the ledger, the handlers and the
middlewares: one class per HTTP answer, which the app's single error handler
turns into Placement's error body (`error_responses`).

    TallyError (500)
    +-- BadRequest (400)                 malformed input; `code` may be a query code
    +-- Forbidden (403)
    +-- NotFound (404)
    +-- MethodNotAllowed (405)
    +-- NotAcceptable (406)
    +-- Conflict (409)
    |   +-- ConcurrentUpdate            placement.concurrent_update
    |   +-- DuplicateName               placement.duplicate_name
    |   +-- InventoryInUse              placement.inventory.inuse
    |   +-- ProviderInUse               placement.resource_provider.inuse
    |   +-- CannotDeleteParent          placement.resource_provider.cannot_delete_parent
    |   +-- ParentLoopFound             a stored tree whose parents come round
    +-- PayloadTooLarge (413)
    +-- UriTooLong (414)
    +-- UnsupportedMediaType (415)
    +-- ServiceUnavailable (503)         with `retry-after` in `extra`
    +-- InsufficientStorage (507)        a sandbox over sandbox_max_mb
"""

from __future__ import annotations

from typing import Any

from tally.placement import errors as codes


class TallyError(Exception):
    status: int = 500
    title: str = "Internal Server Error"
    code: str = codes.DEFAULT

    def __init__(self, detail: str, code: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        self.extra = extra  # extra response headers, e.g. {"allow": "GET"}


class BadRequest(TallyError):
    status, title = 400, "Bad Request"


class Unauthorized(TallyError):
    status, title = 401, "Unauthorized"


class Forbidden(TallyError):
    status, title = 403, "Forbidden"


class NotFound(TallyError):
    status, title = 404, "Not Found"


class MethodNotAllowed(TallyError):
    status, title = 405, "Method Not Allowed"


class NotAcceptable(TallyError):
    status, title = 406, "Not Acceptable"


class Conflict(TallyError):
    status, title = 409, "Conflict"


class ConcurrentUpdate(Conflict):
    code = codes.CONCURRENT_UPDATE


class DuplicateName(Conflict):
    code = codes.DUPLICATE_NAME


class InventoryInUse(Conflict):
    code = codes.INVENTORY_IN_USE


class ProviderInUse(Conflict):
    code = codes.PROVIDER_IN_USE


class CannotDeleteParent(Conflict):
    code = codes.PROVIDER_CANNOT_DELETE_PARENT


class ParentLoopFound(Conflict):
    """A walk over a stored tree met a parent loop (written behind the API's back):
    the request stops and names the providers, instead of walking for ever."""

    def __init__(self, uuids: list[str]) -> None:
        super().__init__(
            f"The provider tree holds a parent loop: {', '.join(uuids)} are each other's "
            "ancestors. Correct their parent_provider_id in the database (`tally db check` "
            "lists every fault)."
        )
        self.uuids = uuids


class PayloadTooLarge(TallyError):
    status, title = 413, "Request Entity Too Large"


class UriTooLong(TallyError):
    status, title = 414, "Request-URI Too Long"


class UnsupportedMediaType(TallyError):
    status, title = 415, "Unsupported Media Type"


class ServiceUnavailable(TallyError):
    status, title = 503, "Service Unavailable"


class InsufficientStorage(TallyError):
    status, title = 507, "Insufficient Storage"
