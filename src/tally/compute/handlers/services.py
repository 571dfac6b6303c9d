"""os-services (the nova-compute services) and os-hypervisors (their compute nodes).

Both are named by integer id before 2.53 and by uuid from 2.53 (a hypervisor's uuid
is its resource provider's). Before 2.53 a service is updated with the actions
`PUT /os-services/{enable|disable|disable-log-reason|force-down}` naming host and
binary in the body; from 2.53 with `PUT /os-services/{uuid}`."""

from __future__ import annotations

import urllib.parse
import uuid as uuidlib
from typing import Any

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest, NotFound
from tally.compute.handlers.common import Resource, body, integer
from tally.compute.ops import hosts as ops
from tally.compute.store import hosts as host_store
from tally.compute.store import servers as server_store

MAX_LIMIT = 1000  # Nova's [api] max_limit
BINARY = "nova-compute"


def is_uuid(value: str) -> bool:
    try:
        uuidlib.UUID(value)
    except ValueError:
        return False
    return True


class Services(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        binary, host = req.get_param("binary"), req.get_param("host")
        wanted = binary in (None, BINARY)
        found = host_store.listing(self.lab.engine, name=host) if wanted else []
        resp.media = {"services": [views.service_view(req, h) for h in found]}


class Service(Resource):
    ADMIN_ONLY = True

    def on_put(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        if req.context.version < (2, 53):
            resp.media = {"service": _action(self.lab, req, service_id, body(req))}
            return
        if not is_uuid(service_id):
            raise BadRequest(f"Invalid uuid {service_id}")
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
        ops.delete_service(self.lab, _service_uuid(self.lab, req, service_id))
        resp.status = falcon.HTTP_204


def _action(lab, req: falcon.Request, action: str, spec: dict[str, Any]) -> dict[str, Any]:
    """PUT /os-services/{action} (before 2.53): enable, disable, disable-log-reason,
    and from 2.11 force-down, on the service that host and binary name."""
    actions = ("enable", "disable", "disable-log-reason")
    if req.context.version >= (2, 11):
        actions += ("force-down",)
    if action not in actions:
        raise NotFound("Unknown action")
    allowed = {"host", "binary", "disabled_reason"} | (
        {"forced_down"} if req.context.version >= (2, 11) else set()
    )
    missing = [k for k in ("host", "binary") if not isinstance(spec.get(k), str)]
    if missing or set(spec) - allowed:
        raise BadRequest(
            f"Invalid input for field/attribute {(missing or sorted(set(spec) - allowed))[0]}: "
            f"the body names host and binary, and only {', '.join(sorted(allowed - {'host'}))}."
        )
    if spec["binary"] != BINARY:
        raise BadRequest(
            f"Updating a {spec['binary']} service is not supported. Only nova-compute "
            "services can be updated."
        )
    found = host_store.get(lab.engine, name=spec["host"])
    if found is None:
        raise NotFound(f"Could not find binary {spec['binary']} on host {spec['host']}.")
    shown: dict[str, Any] = {"host": spec["host"], "binary": BINARY}
    if action == "force-down":
        if "forced_down" not in spec:
            raise BadRequest("Missing forced_down field")
        forced = str(spec["forced_down"]).strip().lower() in ("1", "true", "yes", "on", "y", "t")
        ops.update_service(lab, found["uuid"], forced_down=forced)
        return {**shown, "forced_down": forced}
    reason = None
    if action == "disable-log-reason":
        if "disabled_reason" not in spec:
            raise BadRequest("Missing disabled reason field")
        reason = spec["disabled_reason"]
    status = "enabled" if action == "enable" else "disabled"
    ops.update_service(lab, found["uuid"], status=status, disabled_reason=reason)
    return {**shown, "status": status, **({"disabled_reason": reason} if reason else {})}


def _service_uuid(lab, req: falcon.Request, ref: str) -> str:
    """A service's uuid from its reference: a uuid from 2.53, an integer id before."""
    if req.context.version >= (2, 53):
        if not is_uuid(ref):
            raise BadRequest(f"Invalid uuid {ref}")
        return ref
    if not ref.isdigit():
        raise BadRequest(f"Invalid input received: id must be an integer, not {ref!r}.")
    for host in host_store.listing(lab.engine):
        if host["id"] == int(ref):
            return host["uuid"]
    raise NotFound(f"Service {ref} not found.")


def _hypervisor_ref(req: falcon.Request, host: dict[str, Any]) -> int | str:
    return host["provider_uuid"] if req.context.version >= (2, 53) else host["id"]


class Hypervisors(Resource):
    ADMIN_ONLY = True
    DETAIL = False

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        hosts, more = _hypervisors(self.lab, req, "detail" if self.DETAIL else "")
        used = server_store.usage_by_host(self.lab.engine) if self.DETAIL else {}
        resp.media = {
            "hypervisors": [
                views.hypervisor_view(req, h, used.get(h["name"], {}), self.DETAIL) for h in hosts
            ]
        }
        if more:
            resp.media["hypervisors_links"] = more


def _hypervisors(lab, req: falcon.Request, path: str) -> tuple[list[dict], list[dict] | None]:
    """The hosts listed: by `hypervisor_hostname_pattern` (2.53; 404 when none
    match), or paged by limit and marker (2.33), with a `next` link when full."""
    v, found = req.context.version, host_store.listing(lab.engine)
    pattern = req.get_param("hypervisor_hostname_pattern") if v >= (2, 53) else None
    if pattern is not None:
        if "limit" in req.params or "marker" in req.params:
            raise BadRequest(
                "Paging over hypervisors with the hypervisor_hostname_pattern query "
                "parameter is not supported."
            )
        found = [h for h in found if pattern in h["name"]]
        if not found:
            raise NotFound(f"No hypervisor matching '{pattern}' could be found.")
        return found, None
    if v < (2, 33):
        return found, None
    marker, asked = req.get_param("marker"), integer(req, "limit")
    if marker is not None:
        ids = [str(_hypervisor_ref(req, h)) for h in found]
        if marker not in ids:
            raise BadRequest(f"marker [{marker}] not found")
        found = found[ids.index(marker) + 1 :]
    limit = min(MAX_LIMIT if not asked else asked, MAX_LIMIT)
    page = found[:limit]
    if len(page) != limit:
        return page, None
    params = urllib.parse.urlencode(dict(req.params, marker=str(_hypervisor_ref(req, page[-1]))))
    where = f"os-hypervisors/{path}".rstrip("/")
    return page, [{"rel": "next", "href": f"{views.base(req)}/v2.1/{where}?{params}"}]


class HypervisorsDetail(Hypervisors):
    DETAIL = True


class Hypervisor(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        if req.context.version >= (2, 53) and not is_uuid(hypervisor_id):
            raise BadRequest(f"Invalid uuid {hypervisor_id}")
        host = next(
            (
                h
                for h in host_store.listing(self.lab.engine)
                if hypervisor_id == str(_hypervisor_ref(req, h))
            ),
            None,
        )
        if host is None:
            raise NotFound(f"Hypervisor with ID '{hypervisor_id}' could not be found.")
        used = server_store.usage_by_host(self.lab.engine).get(host["name"], {})
        resp.media = {"hypervisor": views.hypervisor_view(req, host, used, True)}
