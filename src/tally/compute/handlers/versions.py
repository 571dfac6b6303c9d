"""GET / (the versions of the compute API) and GET /v2.1 (its version document)."""

from __future__ import annotations

import falcon

from tally.compute import microversion
from tally.compute.handlers.common import Resource
from tally.compute.views import base


def _v21(req: falcon.Request, maximum: microversion.Version) -> dict:
    """The v2.1 document: its `version` is the newest this lab answers with."""
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": str(maximum),
        "min_version": str(microversion.MIN_VERSION),
        "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": f"{base(req)}/v2.1/"}],
        "media-types": [
            {
                "base": "application/json",
                "type": "application/vnd.openstack.compute+json;version=2.1",
            }
        ],
    }


class Versions(Resource):
    OPEN = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"versions": [_v21(req, self.lab.max_version)]}


class Version(Resource):
    OPEN = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"version": _v21(req, self.lab.max_version)}
