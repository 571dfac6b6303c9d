"""GET / (the versions of the compute API) and GET /v2.1 (its version document)."""

from __future__ import annotations

import falcon

from tally.compute import microversion
from tally.compute.handlers.common import Resource, base


def _v21(req: falcon.Request) -> dict:
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": microversion.text(microversion.MAX_VERSION),
        "min_version": microversion.text(microversion.MIN_VERSION),
        "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": f"{base(req)}/v2.1/"}],
        "media-types": [
            {
                "base": "application/json",
                "type": "application/vnd.openstack.compute+json;version=2.1",
            }  # noqa: E501
        ],
    }


class Versions(Resource):
    OPEN = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"versions": [_v21(req)]}


class Version(Resource):
    OPEN = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"version": _v21(req)}
