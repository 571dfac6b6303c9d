"""os-services (the nova-compute services) and os-hypervisors (their compute nodes)."""

from __future__ import annotations

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest, NotFound
from tally.compute.handlers.common import Resource, body
from tally.compute.ops import hosts as ops
from tally.compute.store import hosts as host_store
from tally.compute.store import servers as server_store


class Services(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        binary, host = req.get_param("binary"), req.get_param("host")
        found = (
            []
            if binary not in (None, "nova-compute")
            else host_store.listing(self.lab.engine, name=host)
        )
        resp.media = {"services": [views.service_view(req, h) for h in found]}


class Service(Resource):
    ADMIN_ONLY = True

    def on_put(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        if req.context.version < (2, 53):
            raise NotFound("Use PUT /os-services/{service_id} (microversion 2.53 or later).")
        changes = body(req)
        unknown = set(changes) - {"status", "disabled_reason", "forced_down"}
        if unknown or not changes:
            raise BadRequest("Only status, disabled_reason and forced_down can be updated.")
        status = changes.get("status")
        if status not in (None, "enabled", "disabled"):
            raise BadRequest("status must be 'enabled' or 'disabled'.")
        if "disabled_reason" in changes and status != "disabled":
            raise BadRequest("Specifying 'disabled_reason' with status 'enabled' is invalid.")
        forced = changes.get("forced_down")
        if forced is not None and not isinstance(forced, bool):
            raise BadRequest("forced_down must be a boolean.")
        host = ops.update_service(
            self.lab,
            service_id,
            status=status,
            disabled_reason=changes.get("disabled_reason"),
            forced_down=forced,
        )
        resp.media = {"service": views.service_view(req, host)}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        ops.delete_service(self.lab, _service_uuid(self.lab, service_id))
        resp.status = falcon.HTTP_204


def _service_uuid(lab, ref: str) -> str:
    """Services are named by uuid from 2.53, by integer id before."""
    if ref.isdigit():
        for host in host_store.listing(lab.engine):
            if host["id"] == int(ref):
                return host["uuid"]
    return ref


class Hypervisors(Resource):
    ADMIN_ONLY = True
    DETAIL = False

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        pattern = req.get_param("hypervisor_hostname_pattern")
        hosts = [
            h for h in host_store.listing(self.lab.engine) if not pattern or pattern in h["name"]
        ]
        used = server_store.usage_by_host(self.lab.engine) if self.DETAIL else {}
        resp.media = {
            "hypervisors": [
                views.hypervisor_view(req, h, used.get(h["name"], {}), self.DETAIL) for h in hosts
            ]
        }


class HypervisorsDetail(Hypervisors):
    DETAIL = True


class Hypervisor(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        host = next(
            (
                h
                for h in host_store.listing(self.lab.engine)
                if hypervisor_id in (h["provider_uuid"], str(h["id"]))
            ),
            None,
        )
        if host is None:
            raise NotFound(f"Hypervisor {hypervisor_id} could not be found.")
        used = server_store.usage_by_host(self.lab.engine).get(host["name"], {})
        resp.media = {"hypervisor": views.hypervisor_view(req, host, used, True)}
