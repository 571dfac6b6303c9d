"""What `tally serve` serves, composed in one place: Placement at / and under
/placement, `/healthcheck` (tally.serve.health), `/metrics` (tally.serve.metrics) and the
operator page at `/tally/ui` (tally.ui: read-only, admin only); with the
lab on, the lab compute API under /compute (v2.1), its image catalog under /image (v2,
tally.compute.images) and the lab identity under /identity (v3).

The compute API claims through Placement's public API with the project's
PlacementClient: over an in-process WSGI transport (as the lab's service user), or
over the network to `lab_placement_url`. Lab tokens reach Placement and compute
through the identity's token filter, as Keystone tokens reach them through auth_token.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import sqlalchemy as sa

from tally.clients.inprocess import as_caller
from tally.config import Settings
from tally.db.engine import engine_for
from tally.serve.edge import NOAUTH_PROTOCOL, StripClientIdentity, UnsafeSettings, is_loopback

log = logging.getLogger("tally")
WSGIApp = Callable[[dict[str, Any], Callable], Iterable[bytes]]
SERVICE_USER = ("nova", "service", "admin,service")  # the lab compute, toward Placement
UI = "/tally/ui"  # the operator page (tally.ui)


def lab_enabled(settings: Settings) -> bool:
    """`lab = auto` is on with a SQLite database (embedded) served on a loopback
    address; off with a server database, or on an address others reach (the lab
    identity's admin/admin must not appear on an operator's Placement port by accident:
    there only `lab = on` serves it)."""
    if settings.lab == "auto":
        return settings.database.startswith("sqlite") and is_loopback(settings.host)
    return settings.lab == "on"


class Mount:
    """Dispatch by path prefix, moving the prefix from PATH_INFO to SCRIPT_NAME (so
    each app builds its links from where it is mounted); the rest goes to `default`."""

    def __init__(self, default: WSGIApp, mounts: dict[str, WSGIApp]) -> None:
        self.default = default
        self.mounts = mounts

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "") or "/"
        for prefix, app in self.mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
                environ["PATH_INFO"] = path[len(prefix) :]
                return app(environ, start_response)
        return self.default(environ, start_response)


class Server(Mount):
    """The composed WSGI app; `lab` is the compute's Lab (None with the lab off),
    `engine` the database engine every app of it shares."""

    lab: Any = None
    engine: sa.Engine | None = None


def create_server(settings: Settings, engine: sa.Engine | None = None) -> Server:
    """Everything served, behind the edge that decides who the caller is."""
    check_auth(settings)
    engine = engine or engine_for(settings)
    server = _edge(settings, _compose(settings, engine))
    server.engine = engine
    return server


def check_auth(settings: Settings) -> None:
    """UnsafeSettings where nothing would check the identity a caller claims, or where
    auth_token could check no token (tally.serve.keystone)."""
    if settings.auth_strategy == "lab" and not lab_enabled(settings):
        raise UnsafeSettings(
            f"auth_strategy = lab needs the lab cloud, and lab = {settings.lab} leaves it off "
            f"with this database: no lab identity would check tokens. Use auth_strategy = "
            f"keystone (or noauth on loopback), or set lab = on."
        )
    if settings.auth_strategy == "keystone":
        from tally.serve.keystone import auth_token_front

        auth_token_front(_never_served, settings)  # built to be checked, then dropped


def _never_served(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
    raise AssertionError("the app of a front built only to check the settings")


def _compose(settings: Settings, engine: sa.Engine) -> Server:
    from tally.placement.app import create_app as placement_app
    from tally.placement.ledger.usages import sample as provider_sample
    from tally.placement.microversion import NEWEST
    from tally.serve.fill_gauges import FillGauges, in_process_compute
    from tally.serve.health import OPENAPI as health_openapi
    from tally.serve.health import Healthcheck, is_admin, is_identified
    from tally.serve.metrics import OPENAPI as metrics_openapi
    from tally.serve.metrics import MetricsApp
    from tally.serve.page import create_page, in_process_client

    beside = {"/healthcheck": health_openapi, "/metrics": metrics_openapi}
    placement = placement_app(settings, engine, beside=beside)
    own_client = in_process_client(settings, engine, placement)  # the page's and the gauges'
    ui: WSGIApp = create_page(settings, engine, placement=own_client)
    health: WSGIApp = Healthcheck(engine, settings.auth_strategy)
    gauges = FillGauges(settings, own_client)
    metrics: WSGIApp = MetricsApp(
        engine,
        settings,
        lambda env: is_admin(env, settings.auth_strategy),
        provider_sample,
        gauges,
        lambda env: is_identified(env, settings.auth_strategy),
    )
    if not lab_enabled(settings):
        return Server(
            placement,
            {"/placement": placement, "/healthcheck": health, "/metrics": metrics, UI: ui},
        )

    from tally.clients.placement import PlacementClient
    from tally.compute.app import create_app as compute_app
    from tally.compute.context import Lab
    from tally.compute.images import create_app as image_app
    from tally.compute.report import ReportClient
    from tally.identity.app import create_app as identity_app
    from tally.identity.filter import TokenFilter
    from tally.identity.secret import token_key
    from tally.identity.tokens import Tokens
    from tally.identity.users import parse_users

    if settings.lab_placement_url:
        client = PlacementClient(settings.lab_placement_url, token=settings.lab_placement_token)
    else:
        transport = httpx.WSGITransport(app=as_caller(placement, *SERVICE_USER))
        client = PlacementClient(
            "http://placement.lab", token=None, version=NEWEST, transport=transport
        )
    report = ReportClient(client)
    compute = compute_app(settings, engine, report)
    images = image_app(settings)
    gauges.compute = in_process_compute(compute, settings.lab_compute_max_version)
    mounts: dict[str, WSGIApp] = {
        "/compute": compute,
        "/image": images,
        "/placement": placement,
        "/healthcheck": health,
        "/metrics": metrics,
        UI: ui,
    }
    root: WSGIApp = placement
    if settings.auth_strategy in ("noauth", "lab"):
        tokens = Tokens(parse_users(settings.lab_users), key=lambda: token_key(engine))
        strict = settings.auth_strategy == "lab"
        root = TokenFilter(placement, tokens, strict)
        mounts = {
            "/identity": identity_app(tokens, _catalog(settings)),
            "/compute": TokenFilter(compute, tokens, strict),
            "/image": TokenFilter(images, tokens, strict),
            "/placement": root,
            "/healthcheck": TokenFilter(health, tokens, strict),
            "/metrics": TokenFilter(metrics, tokens, strict),
            UI: TokenFilter(ui, tokens, strict),
        }
    server = Server(root, mounts)
    server.lab = Lab(engine=engine, settings=settings, placement=report)
    return server


def _catalog(settings: Settings) -> list[tuple[str, str, str]]:
    return [
        ("identity", "keystone", "/identity"),
        ("placement", "placement", settings.lab_placement_url or "/placement"),
        ("compute", "nova", "/compute/v2.1"),
        ("image", "glance", "/image"),
    ]


def _edge(settings: Settings, server: Server) -> Server:
    """In front of everything: with `auth_strategy = keystone` keystonemiddleware's
    auth_token (tally.serve.keystone: its options from the `[keystone_authtoken]` of
    `placement_conf`);
    otherwise the filter that drops identity headers a client sent (tally.serve.edge)."""
    if settings.auth_strategy == "keystone":
        from tally.serve.keystone import auth_token_front

        front: WSGIApp = auth_token_front(server, settings)
    else:
        keep = NOAUTH_PROTOCOL if settings.auth_strategy == "noauth" else frozenset()
        front = StripClientIdentity(server, keep)
    from tally.ui.auth import CookieToken

    # The page's token cookie becomes x-auth-token before anything checks tokens
    # (under /tally/ui only: the Placement API never takes a cookie).
    wrapped = Server(CookieToken(front), {})
    wrapped.lab = server.lab
    return wrapped


def lab_off_reason(settings: Settings) -> str:
    why = f"setting lab = {settings.lab}"
    if settings.lab == "auto" and not settings.database.startswith("sqlite"):
        why += ", and the database is not the embedded SQLite"
    elif settings.lab == "auto" and not is_loopback(settings.host):
        why += f", and {settings.host} is not a loopback address"
    return why


def describe(settings: Settings, url: str) -> list[str]:
    """What `tally serve` prints at start about the lab."""
    if not lab_enabled(settings):
        return [f"Lab off ({lab_off_reason(settings)}): Placement only"]
    from tally.identity.users import parse_users
    from tally.serve.edge import weak_lab_users

    lines = [
        f"Lab compute API on {url}/compute/v2.1 (claims through "
        f"{settings.lab_placement_url or 'this Placement'})"
    ]
    if settings.auth_strategy in ("noauth", "lab"):
        lines.append(f"Lab identity on {url}/identity/v3 (auth_strategy {settings.auth_strategy})")
        users = parse_users(settings.lab_users)
        weak = weak_lab_users(users)
        for user in users.values():
            password = "the default password" if user.name in weak else "its lab_users password"
            lines.append(
                f"  user {user.name} ({password}) project {user.project} "
                f"roles {'+'.join(user.roles) or '-'}"
            )
    return lines


class Ticker(threading.Thread):
    """The lab's clock in a serving process: every second, due migrations advance and
    due hosts report (each step is a compare-and-swap, so several workers agree)."""

    def __init__(self, lab: Any, interval: float = 1.0) -> None:
        super().__init__(name="tally-lab-ticker", daemon=True)
        self.lab, self.interval = lab, interval
        self.stopped = threading.Event()

    def run(self) -> None:
        from tally.clients.http import global_request_id, new_request_id
        from tally.compute.ops.lab import tick

        while not self.stopped.wait(self.interval):
            try:  # each beat's calls to Placement under a request id, as nova-compute's
                with global_request_id(new_request_id()):
                    tick(self.lab)
            except Exception:  # the clock keeps going; the next beat retries
                log.exception("lab tick failed")


def start_ticker(server: Server) -> Ticker | None:
    lab = server.lab
    if lab is None or (
        lab.settings.lab_step_seconds <= 0 and lab.settings.lab_tracker_seconds <= 0
    ):
        return None
    ticker = Ticker(lab)
    ticker.start()
    return ticker


def get_once(settings: Settings, engine: sa.Engine, path: str) -> tuple[str, str]:
    """One GET of `path` from the composed server, in-process, as admin at the newest
    microversion (`tally serve --get`): its status line and body."""
    import falcon.testing

    client = falcon.testing.TestClient(create_server(settings, engine))
    result = client.simulate_get(
        path, headers={"x-auth-token": "admin", "openstack-api-version": "placement latest"}
    )
    return result.status, result.text
