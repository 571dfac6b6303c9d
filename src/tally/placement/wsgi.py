"""The module-level WSGI application, for gunicorn/uwsgi/mod_wsgi.

Settings come from the environment (`TALLY_*`, `TALLY_CONFIG`, `TALLY_PLACEMENT_CONF`).
"""

from tally.config import load_settings
from tally.placement.app import create_wsgi

application = create_wsgi(load_settings())
