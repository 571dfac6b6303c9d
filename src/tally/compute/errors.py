"""Typed errors of the compute API; `app.py` renders them in Nova's shape:
`{"badRequest": {"code": 400, "message": "..."}}`.

ComputeError (500 computeFault)
+-- BadRequest (400 badRequest)
+-- Unauthorized (401 unauthorized)
+-- Forbidden (403 forbidden)
+-- NotFound (404 itemNotFound)
+-- NotAcceptable (406 notAcceptable: an unsupported microversion)
+-- Conflict (409 conflictingRequest)
"""

from __future__ import annotations


class ComputeError(Exception):
    status, key = 500, "computeFault"

    def __init__(self, message: str = "Unexpected API Error.") -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ComputeError):
    status, key = 400, "badRequest"


class Unauthorized(ComputeError):
    status, key = 401, "unauthorized"


class Forbidden(ComputeError):
    status, key = 403, "forbidden"


class NotFound(ComputeError):
    status, key = 404, "itemNotFound"


class NotAcceptable(ComputeError):
    status, key = 406, "notAcceptable"


class Conflict(ComputeError):
    status, key = 409, "conflictingRequest"


class NoValidHost(ComputeError):
    """Scheduling found no host: a server goes to ERROR with this as its fault."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(
            "No valid host was found. " + (reason or "There are not enough hosts available.")
        )
