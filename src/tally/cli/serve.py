"""`tally serve`: migrate an empty database, then serve (tally.serve.server: whole requests
buffered before a thread runs them; `--workers N` pre-forked processes)."""

from __future__ import annotations

import logging
from typing import Any

import click

from tally.config import SETTINGS, Settings, load_settings
from tally.serve.edge import is_loopback
from tally.serve.logs import configure_logging


def read_settings(config_file: str | None, placement_conf: str | None, **given: Any) -> Settings:
    """`load_settings`; a value it refuses, or a file it cannot read, is bad input."""
    try:
        return load_settings(config_file, placement_conf, **given)
    except (ValueError, OSError) as exc:  # a placement.conf's PlacementConfError too
        raise click.UsageError(f"cannot read the settings: {exc}") from None


def refuse_unsafe_bind(settings: Settings) -> None:
    """noauth trusts whatever token it is sent: only on loopback, unless told. The lab
    identity only off loopback once the operator has set its users' passwords."""
    from tally.identity.users import parse_users
    from tally.serve.compose import check_auth
    from tally.serve.edge import UnsafeSettings, weak_lab_users

    try:
        check_auth(settings)
    except UnsafeSettings as exc:
        raise click.ClickException(f"refusing to serve: {exc}") from None
    if is_loopback(settings.host):
        return
    if settings.auth_strategy == "noauth" and not settings.noauth_allow_remote:
        raise click.ClickException(
            f"refusing to serve auth_strategy = noauth on {settings.host}: anyone reaching "
            "it would be an admin. Use auth_strategy = keystone, listen on 127.0.0.1, or set "
            "noauth_allow_remote = true (TALLY_NOAUTH_ALLOW_REMOTE=1) if that is intended."
        )
    weak = weak_lab_users(parse_users(settings.lab_users))
    if settings.auth_strategy == "lab" and weak:
        raise click.ClickException(
            f"refusing to serve auth_strategy = lab on {settings.host}: lab user(s) "
            f"{', '.join(weak)} keep the default password (or their name), which anyone "
            "reaching it could log in with. Set lab_users (TALLY_LAB_USERS="
            "user:password:project:role+role) with passwords of your own, or listen on "
            "127.0.0.1."
        )


def run_server(settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT; each serving process builds its own app, and the
    lab's ticker, after the fork."""
    from tally.serve import server as serving

    def build() -> serving.WSGIApp:
        from tally.serve.compose import create_server, start_ticker

        server = create_server(settings)  # Placement, and the lab when it is on
        start_ticker(server)  # per process: the lab's migrations and resource tracker
        return server

    try:
        sock = serving.listen(settings.host, settings.port)
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}"
        ) from None
    limits = serving.Limits(body=settings.max_body_bytes)
    serving.serve(sock, build, limits, workers=settings.workers)


@click.command()
@click.option("--host", help="Address to listen on (setting `host`).")
@click.option("--port", type=int, help="Port to listen on (setting `port`).")
@click.option("--workers", type=int, help="Worker processes (setting `workers`).")
@click.option("--config", "config_file", help="A TOML settings file.")
@click.option("--placement-conf", help="An upstream placement.conf to read options from.")
@click.option("--get", "get_path", help="Run one GET in-process, print status and body, exit.")
@click.option("--help-settings", is_flag=True, help="Print every setting and exit.")
def serve(
    host: str | None,
    port: int | None,
    workers: int | None,
    config_file: str | None,
    placement_conf: str | None,
    get_path: str | None,
    help_settings: bool,
) -> None:
    """Run the Placement service (SQLite file by default; no setup needed)."""
    if help_settings:
        for s in SETTINGS:
            click.echo(f"{s.name} (env {s.env}, default {s.default!r})\n    {s.help}")
        return
    from tally.db.engine import make_engine  # imported here: keeps `tally --help` quick
    from tally.placement.ledger.bootstrap import prepare_database

    settings = read_settings(config_file, placement_conf, host=host, port=port, workers=workers)
    if not get_path:
        refuse_unsafe_bind(settings)
    configure_logging(settings)
    if not get_path:  # before any count and before the fork: the workers' shared counts
        from tally.counts import prepare_multiprocess

        logging.getLogger("tally").info("metrics of the workers in %s", prepare_multiprocess())
    engine = make_engine(settings.database)
    prepare_database(engine)
    if get_path:
        _get_in_process(settings, engine, get_path)
        return
    engine.dispose()  # workers open their own connections after the fork
    logging.getLogger("tally").info(
        "Tally Placement on http://%s:%s (database %s)",
        settings.host,
        settings.port,
        engine.url.render_as_string(hide_password=True),
    )
    from tally.serve.compose import describe

    for line in describe(settings, f"http://{settings.host}:{settings.port}"):
        logging.getLogger("tally").info("%s", line)
    run_server(settings)


def _get_in_process(settings: Settings, engine, path: str) -> None:  # noqa: ANN001
    from tally.serve.compose import get_once

    status, text = get_once(settings, engine, path)
    click.echo(status)
    click.echo(text)
