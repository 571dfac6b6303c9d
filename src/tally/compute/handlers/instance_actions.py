"""GET /servers/{server_id}/os-instance-actions (a server's actions, newest first;
limit, marker and changes-since from 2.58, changes-before from 2.66) and
.../os-instance-actions/{request_id} (one action with its events). A deleted server's
actions stay readable from 2.21, as in Nova."""

from __future__ import annotations

import falcon

from tally.compute import views
from tally.compute.handlers.common import Resource, moment, page
from tally.compute.ops import actions as ops


def _server(resource: Resource, req: falcon.Request, server_id: str) -> dict:
    deleted = req.context.version >= (2, 21)
    return ops.server_of(resource.lab, req.context.identity, server_id, deleted=deleted)


def _page(req: falcon.Request, found: list[dict]) -> tuple[list[dict], list[dict] | None]:
    """limit/marker paging (2.58; the marker is a request id)."""
    server = found[0]["server_uuid"] if found else ""  # (no rows: no link either)
    href = f"{views.base(req)}/v2.1/servers/{server}/os-instance-actions"
    return page(req, found, "request_id", href, linked_unasked=False)


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
