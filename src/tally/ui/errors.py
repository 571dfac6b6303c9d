"""The page's own refusals, each an HTML error page with its status (`tally.ui.app`
answers them; what Placement refused arrives as `tally.clients.errors.PlacementError`).

PageError
+-- BadRequest      400: a form the page cannot use
+-- Unauthorized    401: no valid token (the page offers its login form)
+-- Forbidden       403: the caller may not read the page, or a cross-site form
+-- NotFound        404: a page path naming nothing the page could show
+-- ServiceUnavailable 503: who the caller is could not be asked (Keystone unreachable)
"""

from __future__ import annotations


class PageError(Exception):
    """A refusal of the page: `status`, `title`, and `detail` for the reader."""

    status: int = 500
    title: str = "Internal Server Error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(PageError):
    status, title = 400, "Bad Request"


class Unauthorized(PageError):
    status, title = 401, "Unauthorized"


class Forbidden(PageError):
    status, title = 403, "Forbidden"


class NotFound(PageError):
    status, title = 404, "Not Found"


class ServiceUnavailable(PageError):
    status, title = 503, "Service Unavailable"
