"""The operator page's WSGI app: one factory, seven routes, one error path.

A client of the Placement API, as the CLI is: it reads through a PlacementClient
(`placement`, a getter of one; in the server, in-process) and never the database.
The server hosting it says who may read it (`gate`) and what runs around each
request (`middleware`: the request id and log); tally.serve.page wires both.

Mounted by tally.serve.compose at /tally/ui (outside Placement's namespace, so no
Placement client mistakes it for an API), so its own paths start at `/`:

    GET  /                     providers: bars per class, filters, sort, capacity box
    GET  /providers/{uuid}     one provider: inventory, consumers, history, tree
    GET  /failures             the newest searches that found nothing, and why
    GET  /sandboxes            the what-if sandboxes alive
    GET  /sandboxes/{id}       one sandbox's diff: providers before and after, steps refused
    GET  /login, POST /login   the token form (see tally.ui.auth)
    POST /logout               forget the token

Read-only: nothing here writes to the ledger. Every answer is HTML with no script
(a Content-Security-Policy says so), never cached, never framed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import falcon

from tally.clients.errors import ClientError, PlacementError
from tally.clients.http import GLOBAL_REQUEST_ID
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.nova.shapes import ShapeError, parse_shape
from tally.ui import auth, render, seams, views
from tally.ui import sandboxes as sandbox_views
from tally.ui.errors import BadRequest, NotFound, PageError

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
        placement: Callable[[], PlacementClient],
        gate: auth.Gate,
        history: seams.HistorySeam,
        capacity: seams.CapacitySeam,
    ) -> None:
        self.settings, self.placement = settings, placement
        self.gate = gate  # Unauthorized/Forbidden unless the caller may read the page
        self.history, self.capacity = history, capacity


def _html(resp: falcon.Response, text: str, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_HTML
    resp.text = text


class Overview:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        who = self.service.gate(req)
        query = views.Query.from_params(req.params, req.query_string)
        fits, shape_error = None, None
        if query.shape and not query.problems:
            fits, shape_error = self._capacity(query.shape)
        view = views.overview(self.service.placement(), query)
        text = render.overview(view, query, req.root_path, who, fits, shape_error)
        status = 400 if view.refused or shape_error else 200  # a parameter it cannot use
        _html(resp, text, status)

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
        who = self.service.gate(req)
        if not views.is_uuid(uuid):  # any text a path can carry: Placement is not asked
            raise NotFound(f"No resource provider with uuid {uuid!r} found.")
        view = views.provider_view(self.service.placement(), uuid, self.service.history)
        _html(resp, render.provider(view, req.root_path, who, view.history is not None))


class FailuresPage:
    LIMIT = 50

    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        who = self.service.gate(req)
        found = seams.recent_failures(self.service.placement(), self.LIMIT)
        _html(resp, render.failures(found, req.root_path, who))


class SandboxesPage:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        who = self.service.gate(req)
        found = sandbox_views.listing(self.service.placement())
        _html(resp, render.sandboxes(found, req.root_path, who))


class SandboxPage:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response, sandbox: str) -> None:
        who = self.service.gate(req)
        if not views.is_uuid(sandbox):  # any text a path can carry: Placement is not asked
            raise NotFound(f"No sandbox {sandbox!r}.")
        view = sandbox_views.sandbox_view(self.service.placement(), sandbox)
        _html(resp, render.sandbox(view, req.root_path, who))


class Login:
    def __init__(self, service: _Service) -> None:
        self.service = service

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        next_path = auth.safe_next(req, req.get_param("next") or "")
        _html(resp, render.login(req.root_path, self.service.settings.auth_strategy, next_path))

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
    request log's metrics (so `/` is not counted as Placement's version document);
    the page's request id sent as the global request id of its reads (Placement's
    request log ties each read to the page's request)."""

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict
    ) -> None:
        req.uri_template = auth.PREFIX + (req.uri_template or "")
        req.context.global_id = GLOBAL_REQUEST_ID.set(req.context.get("request_id"))

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, ok: bool
    ) -> None:
        for name, value in SECURITY_HEADERS.items():
            resp.set_header(name, value)
        if req.context.get("global_id") is not None:
            GLOBAL_REQUEST_ID.reset(req.context.global_id)


def create_app(
    settings: Settings,
    placement: Callable[[], PlacementClient],
    gate: auth.Gate,
    *,
    history: seams.HistorySeam = seams.provider_history,
    capacity: seams.CapacitySeam = seams.capacity_counts,
    middleware: Sequence[object] = (),
) -> falcon.App:
    """The page over the Placement API: `placement` gets the PlacementClient it reads
    through, `gate` says who may read it (tally.ui.auth.Gate), `history` and
    `capacity` are the seams (tally.ui.seams), defaulting to this build's;
    `middleware` runs first around each request (the server's request id and log)."""
    service = _Service(settings, placement, gate, history, capacity)
    app = falcon.App(middleware=[*middleware, _Page()], cors_enable=False)
    app.req_options.auto_parse_qs_csv = False
    app.add_route("/", Overview(service))
    app.add_route("/providers/{uuid}", ProviderPage(service))
    app.add_route("/failures", FailuresPage(service))
    app.add_route("/sandboxes", SandboxesPage(service))
    app.add_route("/sandboxes/{sandbox}", SandboxPage(service))
    app.add_route("/login", Login(service))
    app.add_route("/logout", Logout())
    strategy = settings.auth_strategy

    def page_error(req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict):
        if isinstance(exc, PageError | PlacementError):
            status, title, detail = exc.status, exc.title, exc.detail
        elif isinstance(exc, falcon.HTTPError):
            status, title = exc.status_code, exc.title.split(" ", 1)[-1]
            detail = exc.description or "There is no such page."
            for name, value in (exc.headers or {}).items():
                resp.set_header(name, value)
        elif isinstance(exc, ClientError):  # Placement did not answer
            LOG.error("Placement unavailable: %s", exc)
            status, title, detail = 503, "Service Unavailable", "Placement is unavailable."
        else:
            LOG.exception("Uncaught exception")
            status, title, detail = 500, "Internal Server Error", "An unexpected error occurred."
        here = auth.safe_next(req, req.relative_uri) if req.method == "GET" else ""
        request_id = req.context.get("request_id")
        text = render.error(status, title, detail, req.root_path, strategy, request_id, here)
        _html(resp, text, status)

    app.add_error_handler(Exception, page_error)
    app.add_error_handler(falcon.HTTPError, page_error)
    return app
