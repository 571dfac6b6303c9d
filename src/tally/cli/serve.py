"""`tally serve`: migrate an empty database, then serve (tally.serve.server: whole requests
buffered before a thread runs them; `--workers N` pre-forked processes)."""

from __future__ import annotations

import errno
import logging
import os
import socket
from typing import Any

import click

from tally.cli.exits import BAD_INPUT
from tally.config import SETTINGS, Settings, load_settings
from tally.serve.logs import configure_logging


class BadSettings(click.ClickException):
    """A setting out of its bounds, or a settings file that cannot be read: bad input
    (127), told in one line (it may come from a file or the environment, so no usage
    of the command line goes with it)."""

    exit_code = BAD_INPUT


def read_settings(config_file: str | None, placement_conf: str | None, **given: Any) -> Settings:
    """`load_settings`; a value it refuses, or a file it cannot read, is bad input."""
    try:
        return load_settings(config_file, placement_conf, **given)
    except (ValueError, OSError) as exc:  # a placement.conf's PlacementConfError too
        raise BadSettings(f"cannot read the settings: {exc}") from None


def refuse_unsafe_bind(settings: Settings) -> None:
    """noauth trusts whatever token it is sent: only on loopback, unless told. The lab
    identity only off loopback once the operator has set its users' passwords."""
    from tally.serve.edge import UnsafeSettings
    from tally.serve.start import refuse_unsafe

    try:
        refuse_unsafe(settings, [settings.host])
    except UnsafeSettings as exc:
        raise click.ClickException(f"refusing to serve: {exc}") from None


def bind(settings: Settings) -> socket.socket:
    """The listening socket, bound before anything says it serves; a port taken by
    another server, or an address this host does not have, in one line (status 1)."""
    from tally.serve import server as serving

    where = f"{settings.host}:{settings.port}"
    try:
        return serving.listen(settings.host, settings.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise click.ClickException(
                f"cannot listen on {where}: port in use (another server listens there); "
                "stop it, or choose another port (--port, TALLY_PORT)"
            ) from None
        raise click.ClickException(f"cannot listen on {where}: {exc.strerror or exc}") from None


def run_server(settings: Settings, sock: socket.socket) -> None:
    """Serve on `sock` until SIGTERM/SIGINT; each serving process builds its own app,
    and the lab's ticker, after the fork."""
    from tally.serve import server as serving

    def build() -> serving.WSGIApp:
        from tally.serve.compose import create_server, start_ticker

        server = create_server(settings)  # Placement, and the lab when it is on
        start_ticker(server)  # per process: the lab's migrations and resource tracker
        return server

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
    from tally.db.engine import engine_for  # imported here: keeps `tally --help` quick
    from tally.db.sqlite import refuse_unwritable
    from tally.placement.ledger.bootstrap import prepare_database

    settings = read_settings(config_file, placement_conf, host=host, port=port, workers=workers)
    if not get_path:
        refuse_unsafe_bind(settings)
    refuse_unwritable(settings.database)  # before the bind: the folder fails alone
    sock = None if get_path else bind(settings)  # a busy port fails before anything else
    configure_logging(settings)
    if not get_path:  # before any count and before the fork: the workers' shared counts
        from tally.counts import prepare_multiprocess

        logging.getLogger("tally").info("metrics of the workers in %s", prepare_multiprocess())
    engine = engine_for(settings)
    prepare_database(engine)
    if sock is None:
        _get_in_process(settings, engine, get_path or "/")
        return
    engine.dispose()  # workers open their own connections after the fork
    _announce(settings)
    run_server(settings, sock)


def _announce(settings: Settings) -> None:
    from tally.serve.compose import describe, lab_enabled
    from tally.serve.start import announce

    url = f"http://{settings.host}:{settings.port}"
    workers = f"{settings.workers} worker{'s' if settings.workers > 1 else ''}"
    announce(settings, f"on {url} (pid {os.getpid()}, {workers})")
    for line in describe(settings, url) if lab_enabled(settings) else []:
        logging.getLogger("tally").info("%s", line)


def _get_in_process(settings: Settings, engine, path: str) -> None:  # noqa: ANN001
    from tally.serve.compose import get_once

    status, text = get_once(settings, engine, path)
    click.echo(status)
    click.echo(text)
