"""The module-level WSGI application, `tally.serve.wsgi:application`, for gunicorn, uWSGI or
mod_wsgi (examples in docs/deploy.md).

It composes what `tally serve` serves, after the same checks (tally.serve.start):
settings from the environment (`TALLY_*`, `TALLY_CONFIG`, `TALLY_PLACEMENT_CONF`)
read and bounded by the one settings table; keystone that could check no token,
noauth on an address others reach (the addresses this worker listens on, asked of
the process: the WSGI server's, not the `host` setting) and a data folder it cannot
write are refused in one line, and the server fails to load the app. Logging is set
up as `tally serve` sets it, and one start line names the database, the auth
strategy, the lab and the candidates index (noauth adds a WARNING).

The database must already hold Tally's newest schema (`tally db upgrade`, as
upstream's `placement-manage db sync`): one that does not, an upstream Placement
database, or one whose driver is missing is refused in one line
(probe.UnusableDatabase). A database that is down only now passes: the app answers
503 until it is back. With the `lab = auto` default the lab cloud is off here; with
`lab = on` each process runs the lab's clock as `tally serve` runs it (migrations
advance every `lab_step_seconds`, hosts report every `lab_tracker_seconds`).
"""

from __future__ import annotations

import os

from tally.config import Settings, load_settings
from tally.serve.compose import WSGIApp, create_server, start_ticker
from tally.serve.logs import configure_logging
from tally.serve.start import announce, listening_addresses, refuse_unsafe

LAB_AUTO_OFF = "lab = auto is off under a WSGI server: set lab = on to serve it"


def make_application(settings: Settings | None = None) -> WSGIApp:
    from tally.db import probe, sqlite

    settings = settings or load_settings()
    lab_off = None
    if settings.lab == "auto":
        settings = Settings.of(**{**settings.values, "lab": "off"})
        lab_off = LAB_AUTO_OFF
    addresses = listening_addresses() or []
    refuse_unsafe(settings, [host for host, _ in addresses])
    sqlite.refuse_unwritable(settings.database)
    configure_logging(settings)
    probe.refuse_unmigrated(settings.database)
    server = create_server(settings)  # Placement (and the lab with `lab = on`)
    start_ticker(server)  # per process, as under `tally serve`: the lab's migrations and tracker
    where = f"under WSGI (pid {os.getpid()}"
    if addresses:
        where += ", listening on " + ", ".join(f"{host}:{port}" for host, port in addresses)
    announce(settings, where + ")", lab_off)
    return server


application = make_application()
