"""The lab's own admin API (under /v2.1/os-lab): add and configure hosts, run the
resource tracker, step migrations, inject faults, reset the lab, and a summary with
clouds.yaml. It answers at every microversion."""

from __future__ import annotations

from typing import Any

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest
from tally.compute.handlers.common import Resource, body, server_root
from tally.compute.ops import fault_injection, hosts, moves
from tally.compute.ops import lab as lab_ops
from tally.compute.store import hosts as host_store


def host_view(host: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "uuid",
        "name",
        "provider_uuid",
        *hosts.CONFIG_KEYS,
        "disabled",
        "disabled_reason",
        "forced_down",
    )
    return {**{k: host[k] for k in keys}, "reported_at": views.iso(host["reported_at"])}


class LabSummary(Resource):
    """GET /os-lab: what the lab holds, and a clouds.yaml to reach it."""

    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"lab": lab_ops.summary(self.lab, server_root(req))}


class LabHosts(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"hosts": [host_view(h) for h in host_store.listing(self.lab.engine)]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        specs = body(req).get("hosts")
        if not isinstance(specs, list) or not specs or not all(isinstance(s, dict) for s in specs):
            raise BadRequest("The body needs a non-empty 'hosts' list of objects.")
        created = hosts.add_hosts(self.lab, specs)
        resp.status = falcon.HTTP_201
        resp.media = {"hosts": [host_view(h) for h in created]}


class LabHost(Resource):
    ADMIN_ONLY = True

    def on_put(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        resp.media = {"host": host_view(hosts.configure(self.lab, name, body(req, "host")))}


class LabTracker(Resource):
    ADMIN_ONLY = True

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        host = body(req).get("host") if req.content_length else None
        resp.media = {"reports": hosts.run_tracker(self.lab, host)}


class LabStep(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The lab's clock: every `step_seconds` in-flight moves advance one state by
        themselves (0: only on POST)."""
        resp.media = {"step_seconds": self.lab.settings.lab_step_seconds}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        count = body(req).get("count", 1) if req.content_length else 1
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 100:
            raise BadRequest("count must be an integer from 1 to 100.")
        changed = moves.step(self.lab, count)
        resp.media = {"migrations": [views.migration_view(req, m) for m in changed]}


class LabFaults(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"kinds": list(fault_injection.KINDS)}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = body(req, "fault")
        args = {k: spec.get(k) for k in ("server", "host", "target")}
        if not all(v is None or isinstance(v, str) for v in args.values()):
            raise BadRequest("server, host and target are strings.")
        report = fault_injection.inject(self.lab, str(spec.get("kind")), **args)
        resp.status = falcon.HTTP_201
        resp.media = {"fault": report}


class LabReset(Resource):
    ADMIN_ONLY = True

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"reset": lab_ops.reset(self.lab)}
