"""The operator page's WSGI app: one factory, four routes, one error path.

Mounted by tally/server.py at /tally/ui (outside Placement's namespace, so no
Placement client mistakes it for an API), so its own paths start at `/`:

    GET  /                     providers: bars per class, filters, sort, capacity box
    GET  /providers/{uuid}     one provider: inventory, consumers, history, tree
    GET  /login, POST /login   the token form (see tally.ui.auth)
    POST /logout               forget the token

Read-only: nothing here writes to the ledger. Every answer is HTML with no script
(a Content-Security-Policy says so), never cached, never framed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import falcon
import sqlalchemy as sa

from tally.clients.errors import PlacementError
from tally.config import Settings
from tally.db.retry import unavailable
from tally.nova.shapes import ShapeError, parse_shape
from tally.placement import middleware, policy
from tally.placement.ledger.errors import BadRequest, TallyError
from tally.ui import auth, render, seams, views

LOG = logging.getLogger("tally.ui")
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class _Service:
    def __init__(
        self,
        settings: Settings,
        engine: sa.Engine,
        history: seams.HistorySeam,
        capacity: seams.CapacitySeam,
        placement: Callable[[], Any] | None,
    ) -> None:
        self.settings, self.engine = settings, engine
        self.history, self.capacity = history, capacity
        self.policy = policy.Policy(settings)
        self.placement = placement or seams.in_process_client(settings, engine)

    def authorize(self, req: falcon.Request) -> str:
        """Raise Unauthorized/Forbidden unless the caller may read the page; who it is."""
        identity = auth.identify(req, self.settings.auth_strategy)
        self.policy.authorize(identity, auth.RULE)
        return f"{identity.user_id} ({identity.project_id or 'no project'})"


def _html(resp: falcon.Response, text: str, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_HTML
    resp.text = text


class Overview:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        who = self.service.authorize(req)
        query = views.Query.from_params(req.params, req.query_string)
        fits, shape_error = None, None
        if query.shape and not query.problems:
            fits, shape_error = self._capacity(query.shape)
        view = views.overview(self.service.engine, query)
        body = render.overview(view, query, req.root_path, fits, shape_error)
        status = 400 if view.refused or shape_error else 200  # a parameter it cannot use
        _html(resp, render.page("Providers", body, req.root_path, who), status)

    def _capacity(self, text: str) -> tuple[list[seams.Fit] | None, str | None]:
        """The counts, or why the shape cannot be counted (a 400 of the page)."""
        try:
            shape = parse_shape(text)
        except ShapeError as exc:
            return None, f"Cannot read the shape: {exc}."
        try:
            return self.service.capacity(self.service.placement(), shape), None
        except PlacementError as exc:  # Placement refused the question (an unknown class)
            if exc.status != 400:
                raise
            return None, f"Cannot count the shape: {exc.detail}"


class ProviderPage:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        who = self.service.authorize(req)
        view = views.provider_view(self.service.engine, uuid, self.service.history)
        body = render.provider(view, req.root_path, view.history is not None)
        _html(resp, render.page(view.provider.name, body, req.root_path, who))


class Login:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        next_path = auth.safe_next(req, req.get_param("next") or "")
        body = "<h1>Log in</h1>" + render.login_form(
            req.root_path, self.service.settings.auth_strategy, next_path
        )
        _html(resp, render.page("Log in", body, req.root_path))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.check_same_origin(req)
        form = auth.read_form(req)
        token = form.get("token", "").strip()
        if not auth.TOKEN.fullmatch(token):
            raise BadRequest("That does not look like a token.")
        auth.set_cookie(req, resp, token)
        resp.status = falcon.HTTP_303
        resp.location = auth.safe_next(req, form.get("next", ""))


class Logout:
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.check_same_origin(req)
        auth.set_cookie(req, resp, None)
        resp.status = falcon.HTTP_303
        resp.location = f"{req.root_path}/login"


class _Page:
    """Security headers on every answer; route templates under /tally/ui in the
    request log's metrics (so `/` is not counted as Placement's version document)."""

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        req.uri_template = auth.PREFIX + (req.uri_template or "")

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        for name, value in SECURITY_HEADERS.items():
            resp.set_header(name, value)


def create_app(
    settings: Settings,
    engine: sa.Engine,
    *,
    history: seams.HistorySeam = seams.provider_history,
    capacity: seams.CapacitySeam = seams.capacity_counts,
    placement: Callable[[], Any] | None = None,
) -> falcon.App:
    """The page over a prepared database; `history` and `capacity` are the seams
    (tally.ui.seams), defaulting to this build's; `placement` gets the in-process
    PlacementClient the capacity box counts over (seams.in_process_client)."""
    service = _Service(settings, engine, history, capacity, placement)
    app = falcon.App(middleware=[middleware.RequestIdAndLog(), _Page()], cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.add_route("/", Overview(service))
    app.add_route("/providers/{uuid}", ProviderPage(service))
    app.add_route("/login", Login(service))
    app.add_route("/logout", Logout())
    strategy = settings.auth_strategy

    def page_error(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict):
        if isinstance(exc, TallyError):
            status, title, detail = exc.status, exc.title, exc.detail
            req.context.error = exc
        elif isinstance(exc, falcon.HTTPError):
            status, title = exc.status_code, exc.title.split(" ", 1)[-1]
            detail = exc.description or "There is no such page."
            for name, value in (exc.headers or {}).items():
                resp.set_header(name, value)
        elif unavailable(exc):
            LOG.error("Database unavailable: %s", exc)
            status, title, detail = 503, "Service Unavailable", "The database is unavailable."
        else:
            LOG.exception("Uncaught exception")
            status, title, detail = 500, "Internal Server Error", "An unexpected error occurred."
        here = auth.safe_next(req, req.relative_uri) if req.method == "GET" else ""
        text = render.error(
            status, title, detail, req.root_path, strategy, req.context.request_id, here
        )
        _html(resp, text, status)

    app.add_error_handler(Exception, page_error)
    app.add_error_handler(falcon.HTTPError, page_error)
    return app
