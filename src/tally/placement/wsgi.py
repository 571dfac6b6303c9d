"""The module-level WSGI application, for gunicorn/uwsgi/mod_wsgi.

Settings come from the environment (`TALLY_*`, `TALLY_CONFIG`, `TALLY_PLACEMENT_CONF`).
"""

from tally.config import load_settings
from tally.server import create_server

application = create_server(load_settings())  # Placement (and the lab when `lab` is on)
