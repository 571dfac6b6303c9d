"""Typed errors of the compute API the lab serves; `app.py` renders them in Nova's
shape: `{"badRequest": {"code": 400, "message": "..."}}`. (A client of a compute API
sees such an answer as `tally.clients.compute.ComputeError`.)

ComputeFault (500 computeFault)
+-- BadRequest (400 badRequest)
+-- Unauthorized (401 unauthorized)
+-- Forbidden (403 forbidden)
+-- NotFound (404 itemNotFound)
+-- NotAcceptable (406 notAcceptable: an unsupported microversion)
+-- Conflict (409 conflictingRequest)
"""

from __future__ import annotations


class ComputeFault(Exception):
    status, key = 500, "computeFault"

    def __init__(self, message: str = "Unexpected API Error.") -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ComputeFault):
    status, key = 400, "badRequest"


class Unauthorized(ComputeFault):
    status, key = 401, "unauthorized"


class Forbidden(ComputeFault):
    status, key = 403, "forbidden"


class NotFound(ComputeFault):
    status, key = 404, "itemNotFound"


class NotAcceptable(ComputeFault):
    status, key = 406, "notAcceptable"


class Conflict(ComputeFault):
    status, key = 409, "conflictingRequest"


class NoValidHost(ComputeFault):
    """Scheduling found no host: a server goes to ERROR with this as its fault."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(
            "No valid host was found. " + (reason or "There are not enough hosts available.")
        )
