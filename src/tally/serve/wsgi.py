"""The module-level WSGI application, `tally.serve.wsgi:application`, for gunicorn, uwsgi or
mod_wsgi (examples in docs/deploy.md).

Settings come from the environment (`TALLY_*`, `TALLY_CONFIG`, `TALLY_PLACEMENT_CONF`).
Logging is set up as `tally serve` sets it. The database must already hold Tally's
newest schema (`tally db upgrade`, as upstream's `placement-manage db sync`): one that
does not, an upstream Placement database, or one whose driver is missing is refused in
one line (probe.UnusableDatabase) and the server fails to load the app. A database
that is down only now passes: the app answers 503 until it is back. With the `lab =
auto` default the lab cloud is off here: the address the server binds is not known.
"""

from __future__ import annotations

from tally.config import Settings, load_settings
from tally.serve.compose import WSGIApp, create_server
from tally.serve.logs import configure_logging


def make_application(settings: Settings | None = None) -> WSGIApp:
    from tally.db import probe

    settings = settings or load_settings()
    if settings.lab == "auto":
        settings = Settings.of(**{**settings.values, "lab": "off"})
    configure_logging(settings)
    probe.refuse_unmigrated(settings.database)
    return create_server(settings)  # Placement (and the lab with `lab = on`)


application = make_application()
