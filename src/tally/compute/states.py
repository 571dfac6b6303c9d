"""Nova's server status: a function of vm_state and task_state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TASK_STATUS = {
    "migrating": "MIGRATING",
    "resize_prep": "RESIZE",
    "resize_migrating": "RESIZE",
    "resize_migrated": "RESIZE",
    "resize_finish": "RESIZE",
    "resize_reverting": "REVERT_RESIZE",
    "rebuilding": "REBUILD",
    "rebuild_spawning": "REBUILD",
    "deleting": "ACTIVE",
}
VM_STATUS = {
    "active": "ACTIVE",
    "building": "BUILD",
    "resized": "VERIFY_RESIZE",
    "error": "ERROR",
    "deleted": "DELETED",
    "stopped": "SHUTOFF",
    "shelved_offloaded": "SHELVED_OFFLOADED",
}
POWER_RUNNING, POWER_NOSTATE, POWER_SHUTDOWN = 1, 0, 4


def status_of(server: Mapping[str, Any]) -> str:
    if server["vm_state"] == "active" and server["task_state"] in TASK_STATUS:
        return TASK_STATUS[server["task_state"]]
    return VM_STATUS.get(server["vm_state"], "UNKNOWN")
