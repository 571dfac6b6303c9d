"""What a server claims in Placement, derived from its flavor as Nova derives it.

One rule for the lab compute (which claims) and the doctor (which checks and heals
what a real Nova claimed), so the two can never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def claimed_resources(flavor: Mapping[str, Any], *, volume_backed: bool = False) -> dict[str, int]:
    """VCPU, MEMORY_MB and DISK_GB (root + ephemeral + swap rounded up to GB) of a
    flavor as the compute API shows it; `resources:CLASS=N` extra specs override or
    add classes (0 removes one). A server booted from a volume keeps its root disk in
    the block storage service, so Nova claims no DISK_GB for it (its ephemeral and
    swap disks are still local)."""
    root = 0 if volume_backed else int(flavor.get("disk") or 0)
    wanted = {
        "VCPU": int(flavor.get("vcpus") or 0),
        "MEMORY_MB": int(flavor.get("ram") or 0),
        "DISK_GB": root
        + int(flavor.get("ephemeral") or 0)
        + math.ceil(int(flavor.get("swap") or 0) / 1024),
    }
    for key, value in (flavor.get("extra_specs") or {}).items():
        if key.startswith("resources:"):
            wanted[key.split(":", 1)[1]] = int(value)
    return {rc: n for rc, n in wanted.items() if n > 0}
