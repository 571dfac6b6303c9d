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
    status = 500
    key = "computeFault"

    def __init__(self, message: str = "Unexpected API Error.") -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ComputeError):
    status = 400
    key = "badRequest"


class Unauthorized(ComputeError):
    status = 401
    key = "unauthorized"


class Forbidden(ComputeError):
    status = 403
    key = "forbidden"


class NotFound(ComputeError):
    status = 404
    key = "itemNotFound"


class NotAcceptable(ComputeError):
    status = 406
    key = "notAcceptable"


class Conflict(ComputeError):
    status = 409
    key = "conflictingRequest"


class NoValidHost(ComputeError):
    """Scheduling found no host: a server goes to ERROR with this as its fault."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(
            "No valid host was found. " + (reason or "There are not enough hosts available.")
        )
