"""Cross-origin resource sharing, answered as upstream Placement's CORS middleware does.

Off unless `cors_allowed_origin` names an origin (or `*`). Then every OPTIONS request is
a preflight: it never reaches auth or a handler and always gets an empty 200; the
`access-control-*` headers are added only when the origin, the requested method and
every requested header are allowed (headers are compared case-insensitively, and the
simple headers are always allowed). Other requests from an allowed origin get
`access-control-allow-origin` (and credentials, exposed headers) on any answer,
errors included.
"""

from __future__ import annotations

import falcon

from tally.config import Settings

# Always allowed in a preflight, whatever `cors_allow_headers` says.
SIMPLE_HEADERS = (
    "accept",
    "accept-language",
    "content-type",
    "cache-control",
    "content-language",
    "expires",
    "last-modified",
    "pragma",
)


class Cors:
    def __init__(self, settings: Settings) -> None:
        self.origins = frozenset(settings.cors_allowed_origin)
        self.allow_credentials = settings.cors_allow_credentials
        self.expose_headers = tuple(settings.cors_expose_headers)
        self.max_age = settings.cors_max_age
        self.allow_methods = frozenset(settings.cors_allow_methods)
        self.allow_headers = frozenset(
            h.lower() for h in (*settings.cors_allow_headers, *SIMPLE_HEADERS)
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> list[Cors]:
        """The middleware when CORS is configured, else nothing."""
        return [cls(settings)] if settings.cors_allowed_origin else []

    def _origin(self, req: falcon.Request) -> str | None:
        """The value for `access-control-allow-origin`, None when not allowed."""
        origin = req.get_header("origin")
        if origin is None:
            return None
        if origin in self.origins:
            return origin
        return "*" if "*" in self.origins else None

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.method != "OPTIONS":
            return
        req.context.cors_preflight = True
        resp.status = falcon.HTTP_200
        resp.complete = True  # no auth, no routing, no responder
        origin = self._origin(req)
        method = req.get_header("access-control-request-method")
        if origin is None or method is None or method not in self.allow_methods:
            return
        raw = req.get_header("access-control-request-headers") or ""
        wanted = [h.strip() for h in raw.split(",") if h.strip()]
        if any(h.lower() not in self.allow_headers for h in wanted):
            return
        resp.set_header("vary", "Origin")
        resp.set_header("access-control-allow-origin", origin)
        if self.allow_credentials:
            resp.set_header("access-control-allow-credentials", "true")
        if self.max_age:
            resp.set_header("access-control-max-age", str(self.max_age))
        resp.set_header("access-control-allow-methods", method)
        if wanted:
            resp.set_header("access-control-allow-headers", ",".join(wanted))

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        if getattr(req.context, "cors_preflight", False):
            return
        origin = self._origin(req)
        if origin is None:
            return
        resp.append_header("vary", "Origin")
        resp.set_header("access-control-allow-origin", origin)
        if self.allow_credentials:
            resp.set_header("access-control-allow-credentials", "true")
        if self.expose_headers:
            resp.set_header("access-control-expose-headers", ",".join(self.expose_headers))
