"""Servers: create, list (brief and detail, with Nova's filters), show, delete.
The server actions are in actions.py."""

from __future__ import annotations

import secrets
import urllib.parse
from typing import Any

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest
from tally.compute.handlers.common import Resource, body, flag, integer
from tally.compute.ops import servers as ops
from tally.compute.store import hosts as host_store

MAX_LIMIT = 1000  # Nova's osapi_max_limit


def _request(spec: dict[str, Any]) -> ops.ServerRequest:
    name, flavor = spec.get("name"), spec.get("flavorRef")
    if not isinstance(name, str) or not name.strip() or len(name) > 255:
        raise BadRequest("Invalid input for field/attribute name.")
    if not isinstance(flavor, str | int) or not str(flavor):
        raise BadRequest("Invalid input for field/attribute flavorRef.")
    counts = []
    for key in ("min_count", "max_count"):
        value = spec.get(key, 1)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise BadRequest(f"Invalid input for field/attribute {key}.")
        counts.append(value)
    min_count, max_count = counts
    if "max_count" not in spec:
        max_count = max(max_count, min_count)
    host = spec.get("host")
    zone = spec.get("availability_zone") or ""
    if not host and ":" in zone:
        host = zone.split(":")[1] or None
    image = spec.get("imageRef") or ""
    return ops.ServerRequest(
        name=name.strip(),
        flavor=str(flavor).rstrip("/").rsplit("/", 1)[-1],
        image=str(image).rstrip("/").rsplit("/", 1)[-1],
        count=max_count,
        min_count=min_count,
        host=host,
        volume_backed=_boots_from_volume(spec.get("block_device_mapping_v2")),
    )


def _boots_from_volume(mappings: Any) -> bool:
    """Whether the block device mapping (v2) puts the root disk (boot_index 0) on a
    volume; the lab keeps no volumes, only this fact."""
    if mappings is None:
        return False
    bad = BadRequest("Invalid input for field/attribute block_device_mapping_v2.")
    if not isinstance(mappings, list) or not all(isinstance(m, dict) for m in mappings):
        raise bad
    for mapping in mappings:
        index = mapping.get("boot_index")
        if isinstance(index, bool) or not isinstance(index, int | str | None):
            raise bad
        if index is None or str(index).strip() != "0":
            continue
        target = mapping.get("destination_type")
        if target not in (None, "local", "volume"):
            raise bad
        if target is None:  # as Nova: a volume or a snapshot boots from a volume
            return mapping.get("source_type") in ("volume", "snapshot")
        return target == "volume"
    return False


def _filters(req: falcon.Request) -> ops.ServerFilters:
    limit = integer(req, "limit")
    return ops.ServerFilters(
        all_tenants=flag(req, "all_tenants"),
        project_id=req.get_param("project_id") or req.get_param("tenant_id"),
        user_id=req.get_param("user_id"),
        host=req.get_param("host") or req.get_param("node"),
        status=req.get_param("status"),
        name=req.get_param("name"),
        flavor=req.get_param("flavor"),
        reservation_id=req.get_param("reservation_id"),
        deleted=flag(req, "deleted"),
        limit=min(limit, MAX_LIMIT) if limit is not None else MAX_LIMIT,
        marker=req.get_param("marker"),
    )


class Servers(Resource):
    DETAIL = False

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        who = req.context.identity
        found, more = ops.listing(self.lab, who, _filters(req))
        hosts = {h["name"]: h for h in host_store.listing(self.lab.engine)} if self.DETAIL else {}
        docs = [
            views.server_detail(req, s, hosts.get(s["host"]), who.is_admin)
            if self.DETAIL
            else views.server_brief(req, s)
            for s in found
        ]
        resp.media = {"servers": docs}
        if more:
            params = dict(req.params, marker=found[-1]["uuid"], limit=str(len(found)))
            path = "servers/detail" if self.DETAIL else "servers"
            href = f"{views.base(req)}/v2.1/{path}?{urllib.parse.urlencode(params)}"
            resp.media["servers_links"] = [{"rel": "next", "href": href}]

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = body(req, "server")
        if "host" in spec and req.context.version < (2, 74):  # a requested host: 2.74
            raise BadRequest(
                "Invalid input for field/attribute server. Additional properties are not "
                "allowed ('host' was unexpected)"
            )
        created = ops.create(self.lab, req.context.identity, _request(spec))
        resp.status = falcon.HTTP_202
        if spec.get("return_reservation_id"):
            resp.media = {"reservation_id": created[0]["reservation_id"]}
            return
        first = created[0]
        resp.media = {
            "server": {
                **views.server_brief(req, first),
                "OS-DCF:diskConfig": "MANUAL",
                "security_groups": [{"name": "default"}],
                "adminPass": secrets.token_urlsafe(9),
            }
        }


class ServersDetail(Servers):
    DETAIL = True

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise falcon.HTTPMethodNotAllowed(["GET"])


class Server(Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        who = req.context.identity
        server = ops.get(self.lab, who, server_id)
        host = host_store.get(self.lab.engine, name=server["host"]) if server["host"] else None
        resp.media = {"server": views.server_detail(req, server, host, who.is_admin, show=True)}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        ops.delete(self.lab, req.context.identity, server_id)
        resp.status = falcon.HTTP_204
