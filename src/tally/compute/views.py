"""Documents of the compute API, shaped per microversion as Nova shapes them: each
field that a microversion added (or dropped) is written with that version, from
Nova's REST API version history, so a lab capped at 2.1 or 2.53 shows none of the
later ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import falcon

from tally.compute.ops import actions
from tally.compute.states import status_of

# statuses whose servers show `progress` (Nova's server view)
PROGRESS_STATUSES = ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING")


def base(req: falcon.Request) -> str:
    """Where the compute API is mounted, as the client reached it."""
    return f"{req.forwarded_scheme}://{req.forwarded_host}{req.root_path}"


def links(req: falcon.Request, kind: str, ident: str) -> list[dict[str, str]]:
    return [
        {"rel": "self", "href": f"{base(req)}/v2.1/{kind}/{ident}"},
        {"rel": "bookmark", "href": f"{base(req)}/{kind}/{ident}"},
    ]


def bookmark(req: falcon.Request, kind: str, ident: str) -> list[dict[str, str]]:
    """The links of a resource embedded in another (a server's image and flavor)."""
    return [{"rel": "bookmark", "href": f"{base(req)}/{kind}/{ident}"}]


def iso(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def iso_micro(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if value else None


def host_status(host: Mapping[str, Any] | None, server: Mapping[str, Any]) -> str:
    if not server["host"]:
        return ""
    if host is None:
        return "UNKNOWN"
    if host["forced_down"]:
        return "DOWN"
    return "MAINTENANCE" if host["disabled"] else "UP"


def server_brief(req: falcon.Request, server: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": server["uuid"],
        "name": server["name"],
        "links": links(req, "servers", server["uuid"]),
    }


def server_detail(
    req: falcon.Request,
    server: Mapping[str, Any],
    host: Mapping[str, Any] | None,
    admin: bool,
    show: bool = False,
) -> dict[str, Any]:
    """A server as GET /servers/detail (or, `show`, GET /servers/{id}) gives it."""
    v = req.context.version
    status = status_of(server)
    flavor = server["flavor"]
    host_id = actions.host_id(server["project_id"], server["host"])
    doc: dict[str, Any] = {
        **server_brief(req, server),
        "status": status,
        "tenant_id": server["project_id"],
        "user_id": server["user_id"],
        "metadata": {},
        "hostId": host_id,
        "image": {"id": server["image_ref"], "links": bookmark(req, "images", server["image_ref"])}
        if server["image_ref"]
        else "",
        "created": iso(server["created_at"]),
        "updated": iso(server["updated_at"]),
        "addresses": {},
        "accessIPv4": "",
        "accessIPv6": "",
        "OS-DCF:diskConfig": "MANUAL",
        "OS-EXT-AZ:availability_zone": "nova",
        "config_drive": "",
        "key_name": None,
        "OS-SRV-USG:launched_at": iso_micro(server.get("launched_at")),
        "OS-SRV-USG:terminated_at": iso_micro(server.get("deleted_at")),
        "OS-EXT-STS:task_state": server["task_state"],
        "OS-EXT-STS:vm_state": server["vm_state"],
        "OS-EXT-STS:power_state": server["power_state"],
        "os-extended-volumes:volumes_attached": [],
        "security_groups": [{"name": "default"}],
    }
    if status in PROGRESS_STATUSES:
        doc["progress"] = 0
    if v >= (2, 47):  # the flavor itself, no longer a reference to it
        doc["flavor"] = {
            "vcpus": flavor["vcpus"],
            "ram": flavor["ram"],
            "disk": flavor["disk"],
            "ephemeral": flavor["ephemeral"],
            "swap": flavor["swap"],
            "original_name": flavor["name"],
            "extra_specs": flavor.get("extra_specs", {}),
        }
    else:
        doc["flavor"] = {"id": flavor["id"], "links": bookmark(req, "flavors", flavor["id"])}
    if admin:
        doc.update(
            {
                "OS-EXT-SRV-ATTR:host": server["host"],
                "OS-EXT-SRV-ATTR:hypervisor_hostname": server["host"],
                "OS-EXT-SRV-ATTR:instance_name": f"instance-{server['id']:08x}",
            }
        )
        if v >= (2, 3):
            doc.update(
                {
                    "OS-EXT-SRV-ATTR:reservation_id": server["reservation_id"],
                    "OS-EXT-SRV-ATTR:launch_index": server["launch_index"],
                    "OS-EXT-SRV-ATTR:hostname": server["name"],
                    "OS-EXT-SRV-ATTR:kernel_id": "",
                    "OS-EXT-SRV-ATTR:ramdisk_id": "",
                    "OS-EXT-SRV-ATTR:root_device_name": "/dev/vda",
                    "OS-EXT-SRV-ATTR:user_data": None,
                }
            )
    if v >= (2, 9):
        doc["locked"] = False
    if v >= (2, 16) and admin:  # policy: administrators only, by default
        doc["host_status"] = host_status(host, server)
    if v >= (2, 19):
        doc["description"] = None
    if v >= (2, 26):
        doc["tags"] = []
    if v >= (2, 63):
        doc["trusted_image_certificates"] = None
    if v >= (2, 71) and show:  # on GET /servers/{id}, not in the detailed list
        doc["server_groups"] = []
    if v >= (2, 73):
        doc["locked_reason"] = None
    if v >= (2, 90):  # visible to every user from 2.90
        doc["OS-EXT-SRV-ATTR:hostname"] = server["name"]
    if v >= (2, 96):
        doc["pinned_availability_zone"] = None
    if server["fault"] and server["vm_state"] in ("error", "deleted"):  # as Nova shows it
        doc["fault"] = server["fault"]
    return doc


def flavor_view(req: falcon.Request, flavor: Mapping[str, Any], detail: bool = True) -> dict:
    v = req.context.version
    doc: dict[str, Any] = {
        "id": flavor["flavorid"],
        "name": flavor["name"],
        "links": links(req, "flavors", flavor["flavorid"]),
    }
    if v >= (2, 55):
        doc["description"] = flavor["description"]
    if not detail:
        return doc
    doc.update(
        {
            "ram": flavor["memory_mb"],
            "disk": flavor["root_gb"],
            "vcpus": flavor["vcpus"],
            "OS-FLV-EXT-DATA:ephemeral": flavor["ephemeral_gb"],
            "OS-FLV-DISABLED:disabled": False,
            "swap": flavor["swap"] if flavor["swap"] or v >= (2, 75) else "",
            "rxtx_factor": flavor["rxtx_factor"],
            "os-flavor-access:is_public": flavor["is_public"],
        }
    )
    if v >= (2, 61):
        doc["extra_specs"] = flavor["extra_specs"]
    return doc


def service_view(req: falcon.Request, host: Mapping[str, Any]) -> dict[str, Any]:
    v = req.context.version
    doc: dict[str, Any] = {
        "id": host["uuid"] if v >= (2, 53) else host["id"],
        "binary": "nova-compute",
        "host": host["name"],
        "zone": "nova",
        "status": "disabled" if host["disabled"] else "enabled",
        "state": "down" if host["forced_down"] else "up",
        "updated_at": iso_micro(host["updated_at"]),
        "disabled_reason": host["disabled_reason"],
    }
    if v >= (2, 11):
        doc["forced_down"] = bool(host["forced_down"])
    return doc


def hypervisor_view(
    req: falcon.Request, host: Mapping[str, Any], used: Mapping[str, int], detail: bool
) -> dict[str, Any]:
    v = req.context.version
    doc: dict[str, Any] = {
        "id": host["provider_uuid"] if v >= (2, 53) else host["id"],
        "hypervisor_hostname": host["name"],
        "state": "down" if host["forced_down"] else "up",
        "status": "disabled" if host["disabled"] else "enabled",
    }
    if not detail:
        return doc
    doc.update(
        {
            "host_ip": host["host_ip"],
            "hypervisor_type": "QEMU",
            "hypervisor_version": 8002000,
            "service": {
                "host": host["name"],
                "id": host["uuid"] if v >= (2, 53) else host["id"],
                "disabled_reason": host["disabled_reason"],
            },
        }
    )
    if v >= (2, 88):
        doc["uptime"] = None
        return doc
    vcpus_used, ram_used = used.get("vcpus", 0), used.get("memory_mb", 0)
    disk_used = used.get("disk_gb", 0)
    doc.update(
        {
            "vcpus": host["vcpus"],
            "memory_mb": host["memory_mb"],
            "local_gb": host["disk_gb"],
            "vcpus_used": vcpus_used,
            "memory_mb_used": ram_used + host["reserved_memory_mb"],
            "local_gb_used": disk_used,
            "free_ram_mb": host["memory_mb"] - ram_used - host["reserved_memory_mb"],
            "free_disk_gb": host["disk_gb"] - disk_used,
            "current_workload": 0,
            "running_vms": used.get("servers", 0),
            "disk_available_least": host["disk_gb"] - disk_used,
            "cpu_info": {} if v >= (2, 28) else "{}",  # a JSON object from 2.28
        }
    )
    return doc


def migration_view(req: falcon.Request, m: Mapping[str, Any]) -> dict[str, Any]:
    v = req.context.version
    doc: dict[str, Any] = {
        "id": m["id"],
        "source_node": m["source_compute"],
        "dest_node": m["dest_compute"],
        "source_compute": m["source_compute"],
        "dest_compute": m["dest_compute"],
        "dest_host": "",
        "status": m["status"],
        "instance_uuid": m["server_uuid"],
        "old_instance_type_id": m["flavor_id"],
        "new_instance_type_id": m["flavor_id"],
        "created_at": iso_micro(m["created_at"]),
        "updated_at": iso_micro(m["updated_at"]),
    }
    if v >= (2, 23):
        doc["migration_type"] = m["migration_type"]
        if m["migration_type"] == "live-migration" and m["status"] in LIVE_IN_PROGRESS:
            doc["links"] = links(req, f"servers/{m['server_uuid']}/migrations", str(m["id"]))
    if v >= (2, 59):
        doc["uuid"] = m["uuid"]
    if v >= (2, 80):
        doc["user_id"], doc["project_id"] = m["user_id"], m["project_id"]
    return doc


LIVE_IN_PROGRESS = ("accepted", "queued", "preparing", "running")


def server_migration_view(req: falcon.Request, m: Mapping[str, Any], ram_mb: int) -> dict:
    v = req.context.version
    total = ram_mb * 1024 * 1024
    processed = total // 2 if m["status"] == "running" else 0
    doc: dict[str, Any] = {
        "id": m["id"],
        "server_uuid": m["server_uuid"],
        "status": m["status"],
        "source_node": m["source_compute"],
        "dest_node": m["dest_compute"],
        "source_compute": m["source_compute"],
        "dest_compute": m["dest_compute"],
        "dest_host": "",
        "memory_total_bytes": total,
        "memory_processed_bytes": processed,
        "memory_remaining_bytes": total - processed,
        "disk_total_bytes": 0,
        "disk_processed_bytes": 0,
        "disk_remaining_bytes": 0,
        "created_at": iso_micro(m["created_at"]),
        "updated_at": iso_micro(m["updated_at"]),
    }
    if v >= (2, 59):
        doc["uuid"] = m["uuid"]
    if v >= (2, 80):
        doc["user_id"], doc["project_id"] = m["user_id"], m["project_id"]
    return doc


ACTION_KEYS = ("action", "instance_uuid", "message", "project_id", "request_id", "user_id")


def instance_action(req: falcon.Request, action: Mapping[str, Any]) -> dict[str, Any]:
    """An instance action as GET /servers/{id}/os-instance-actions lists it."""
    doc = {k: action[k] for k in ACTION_KEYS if k != "instance_uuid"}
    doc["instance_uuid"] = action["server_uuid"]
    doc["start_time"] = iso_micro(action["start_time"])
    if req.context.version >= (2, 58):
        doc["updated_at"] = iso_micro(action["updated_at"])
    return doc


def instance_action_events(
    req: falcon.Request, action: Mapping[str, Any], admin: bool
) -> list[dict[str, Any]] | None:
    """Its events, or None where the caller sees none: before 2.51 only an admin sees
    them; the traceback, and the host (2.62), are an admin's only; the host's hashed
    hostId (2.62) and the failure's details (2.84) are everyone's."""
    v = req.context.version
    if v < (2, 51) and not admin:
        return None
    shown = ["event", "start_time", "finish_time", "result"] + (["traceback"] if admin else [])
    if v >= (2, 62):
        shown += ["hostId"] + (["host"] if admin else [])
    if v >= (2, 84):
        shown.append("details")
    return [{k: event.get(k) for k in shown} for event in action["events"]]
