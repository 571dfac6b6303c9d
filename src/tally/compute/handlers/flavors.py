"""Flavors: list (and detail), show, create, delete."""

from __future__ import annotations

import uuid

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest, Conflict, Forbidden, NotFound
from tally.compute.handlers.common import Resource, body
from tally.compute.store import flavors as store


def _number(spec: dict, key: str, default: int | float | None = None, kind=int):
    value = spec.get(key, default)
    if value in (None, "") and default is not None:
        value = default
    try:
        value = kind(value)
    except (TypeError, ValueError):
        raise BadRequest(f"Invalid input for field/attribute {key}.") from None
    if value < 0:
        raise BadRequest(f"Invalid input for field/attribute {key}: must be >= 0.")
    return value


class Flavors(Resource):
    DETAIL = False

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = store.listing(self.lab.engine)
        resp.media = {"flavors": [views.flavor_view(req, f, self.DETAIL) for f in found]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not req.context.identity.is_admin:
            raise Forbidden("Policy doesn't allow os_compute_api:os-flavor-manage:create.")
        spec = body(req, "flavor")
        if "description" in spec and req.context.version < (2, 55):
            raise BadRequest(
                "Invalid input for field/attribute flavor. Additional properties are not "
                "allowed ('description' was unexpected)"
            )
        name = spec.get("name")
        if not isinstance(name, str) or not name.strip():
            raise BadRequest("Invalid input for field/attribute name.")
        extra = spec.get("extra_specs") or {}
        if not isinstance(extra, dict):
            raise BadRequest("extra_specs must be an object.")
        flavor = {
            "flavorid": str(spec.get("id") or uuid.uuid4()),
            "name": name.strip(),
            "vcpus": _number(spec, "vcpus"),
            "memory_mb": _number(spec, "ram"),
            "root_gb": _number(spec, "disk"),
            "ephemeral_gb": _number(spec, "OS-FLV-EXT-DATA:ephemeral", 0),
            "swap": _number(spec, "swap", 0),
            "rxtx_factor": _number(spec, "rxtx_factor", 1.0, float),
            "is_public": bool(spec.get("os-flavor-access:is_public", True)),
            "description": spec.get("description"),
            "extra_specs": {str(k): str(v) for k, v in extra.items()},
        }
        if flavor["vcpus"] < 1 or flavor["memory_mb"] < 1:
            raise BadRequest("vcpus and ram must be at least 1.")
        created = store.create(self.lab.engine, flavor)
        if created is None:
            raise Conflict(f"Flavor with name {name} or ID {flavor['flavorid']} already exists.")
        resp.media = {"flavor": views.flavor_view(req, created)}


class FlavorsDetail(Flavors):
    DETAIL = True

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise falcon.HTTPMethodNotAllowed(["GET"])


class Flavor(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        resp.media = {"flavor": views.flavor_view(req, _flavor(self.lab, flavor_id))}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        if not req.context.identity.is_admin:
            raise Forbidden("Policy doesn't allow os_compute_api:os-flavor-manage:delete.")
        if not store.delete(self.lab.engine, flavor_id):
            raise NotFound(f"Flavor {flavor_id} could not be found.")
        resp.status = falcon.HTTP_202


class FlavorExtraSpecs(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        resp.media = {"extra_specs": _flavor(self.lab, flavor_id)["extra_specs"]}


def _flavor(lab, ref: str) -> dict:
    found = store.get(lab.engine, ref)
    if found is None:
        raise NotFound(f"Flavor {ref} could not be found.")
    return found
