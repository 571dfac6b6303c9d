"""GET /servers/{server_id}/os-instance-actions (a server's actions, newest first;
limit, marker and changes-since from 2.58, changes-before from 2.66) and
.../os-instance-actions/{request_id} (one action with its events). A deleted server's
actions stay readable from 2.21, as in Nova."""

from __future__ import annotations

import urllib.parse

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest
from tally.compute.handlers.common import Resource, integer, moment
from tally.compute.ops import actions as ops

MAX_LIMIT = 1000  # Nova's [api] max_limit


def _server(resource: Resource, req: falcon.Request, server_id: str) -> dict:
    deleted = req.context.version >= (2, 21)
    return ops.server_of(resource.lab, req.context.identity, server_id, deleted=deleted)


def _page(req: falcon.Request, found: list[dict]) -> tuple[list[dict], list[dict] | None]:
    """limit/marker paging (2.58; the marker is a request id): the page, and the link
    to the next when the page is full."""
    marker, asked = req.get_param("marker"), integer(req, "limit")
    if marker:
        ids = [a["request_id"] for a in found]
        if marker not in ids:
            raise BadRequest(f"Marker {marker} could not be found.")
        found = found[ids.index(marker) + 1 :]
    limit = min(MAX_LIMIT if asked is None else asked, MAX_LIMIT)
    page = found[:limit]
    if not limit or len(page) != limit or asked is None:
        return page, None
    query = urllib.parse.urlencode(dict(req.params, marker=page[-1]["request_id"]))
    href = f"{views.base(req)}/v2.1/servers/{page[0]['server_uuid']}/os-instance-actions"
    return page, [{"rel": "next", "href": f"{href}?{query}"}]


class InstanceActions(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        v = req.context.version
        server = _server(self, req, server_id)
        since = moment(req, "changes-since") if v >= (2, 58) else None
        before = moment(req, "changes-before") if v >= (2, 66) else None
        found = ops.listing(self.lab, server, since, before)
        page, more = _page(req, found) if v >= (2, 58) else (found, None)
        resp.media = {"instanceActions": [views.instance_action(req, a) for a in page]}
        if more:
            resp.media["links"] = more


class InstanceAction(Resource):
    def on_get(
        self, req: falcon.Request, resp: falcon.Response, server_id: str, request_id: str
    ) -> None:
        who = req.context.identity
        action = ops.get(self.lab, _server(self, req, server_id), request_id)
        doc = views.instance_action(req, action)
        events = views.instance_action_events(req, action, who.is_admin)
        if events is not None:
            doc["events"] = events
        resp.media = {"instanceAction": doc}
