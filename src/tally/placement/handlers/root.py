"""GET /: the version document (no authentication needed)."""

from __future__ import annotations

import falcon

from tally.placement.handlers.common import cache_headers
from tally.placement.microversion import NEWEST, VERSIONS


class Home:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {
            "versions": [
                {
                    "id": f"v{VERSIONS[0]}",
                    "max_version": NEWEST,
                    "min_version": VERSIONS[0],
                    "status": "CURRENT",
                    "links": [{"rel": "self", "href": ""}],
                }
            ]
        }
        cache_headers(req, resp)
