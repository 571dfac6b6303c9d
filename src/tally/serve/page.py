"""The operator page (tally.ui) wired into this server: the page is a client of the
API and knows nothing of the server, so what it needs of the server is given here.

- `in_process_client`: the PlacementClient it reads through, on this server's own
  Placement app in-process, as an admin at the newest microversion (also the capacity
  gauges' client).
- `PolicyGate`: who may read it, as Placement decides who may call it: the identity
  the auth mode reads (noauth's token, or the headers auth_token or the lab's token
  filter confirmed), then the policy rule `tally:ui:view`.
- Placement's request id and request log, around each of its requests.
"""

from __future__ import annotations

from collections.abc import Callable

import falcon
import httpx
import sqlalchemy as sa

from tally.clients.inprocess import WSGIApp, as_caller, once
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.placement import error_types, microversion, middleware, policy
from tally.placement.app import create_app as placement_app
from tally.placement.context import Identity
from tally.ui import app as ui_app
from tally.ui import auth, seams
from tally.ui import errors as page_errors


def in_process_client(
    settings: Settings, engine: sa.Engine, placement: WSGIApp | None = None
) -> Callable[[], PlacementClient]:
    """A getter of one PlacementClient on this server's Placement, in-process, as an
    admin at the newest microversion: over `placement` (the server's own app), or an app of its own
    built on first use."""

    def make() -> PlacementClient:
        app = placement if placement is not None else placement_app(settings, engine)
        transport = httpx.WSGITransport(app=as_caller(app, "tally-ui", "tally-ui", "admin"))
        return PlacementClient(
            "http://placement.ui", token=None, version=microversion.NEWEST, transport=transport
        )

    return once(make)


class PolicyGate:
    """The page's gate (tally.ui.auth.Gate): the caller as Placement's auth mode
    reads it, allowed by the policy rule `tally:ui:view`."""

    def __init__(self, settings: Settings) -> None:
        self.policy = policy.Policy(settings)
        self.auth_strategy = settings.auth_strategy

    def identify(self, req: falcon.Request) -> Identity:
        """The caller, as Placement would see it (Unauthorized without a valid
        token); kept on the request's context, as Placement keeps it, for the
        request log."""
        identity = middleware.identify(self.auth_strategy, req.get_header, req.env)
        req.context.identity = identity
        return identity

    def __call__(self, req: falcon.Request) -> auth.Caller:
        try:
            identity = self.identify(req)
            self.policy.authorize(identity, auth.RULE)
        except error_types.Unauthorized as exc:
            raise page_errors.Unauthorized(exc.detail) from None
        except error_types.Forbidden as exc:
            raise page_errors.Forbidden(exc.detail) from None
        except error_types.ServiceUnavailable as exc:
            raise page_errors.ServiceUnavailable(exc.detail) from None
        return auth.Caller(identity.user_id, identity.project_id)


def create_page(
    settings: Settings,
    engine: sa.Engine,
    *,
    placement: Callable[[], PlacementClient] | None = None,
    history: seams.HistorySeam = seams.provider_history,
    capacity: seams.CapacitySeam = seams.capacity_counts,
) -> falcon.App:
    """The page of this server: reading through `placement` (default: an in-process
    client on a Placement app of its own over `engine`), gated by the policy."""
    return ui_app.create_app(
        settings,
        placement or in_process_client(settings, engine),
        PolicyGate(settings),
        history=history,
        capacity=capacity,
        middleware=[middleware.RequestIdAndLog()],
    )
