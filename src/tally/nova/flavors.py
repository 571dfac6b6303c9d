"""What a server claims in Placement, derived from its flavor as Nova derives it (its
`resources_from_flavor`, which `nova-manage placement heal_allocations` uses too).

One rule for the lab compute (which claims) and the doctor (which checks and heals
what a real Nova claimed), so the two never disagree.
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Mapping
from typing import Any

import os_resource_classes as orc

# resources:CLASS, or a request group's resourcesN:CLASS / resources_NAME:CLASS
RESOURCE_SPEC = re.compile(r"resources([A-Za-z0-9_-]{1,64})?:(.+)")
TRUE = ("1", "t", "true", "on", "y", "yes")  # oslo's bool_from_string, as Nova reads specs


def claimed_resources(
    flavor: Mapping[str, Any], *, volume_backed: bool = False, numbered: bool = True
) -> dict[str, int]:
    """The classes and amounts one server of `flavor` (as the compute API shows it)
    holds, in Nova's order:

    - `resources[N]:CLASS=AMOUNT` extra specs ask for a class (0: none of it); the
      amounts of numbered groups add up (`numbered=False`: the unnumbered group alone,
      as one query of `tally capacity` asks);
    - `hw:cpu_policy=dedicated` asks PCPU for the vcpus (one more with
      `hw:emulator_threads_policy=isolate`); `mixed` asks PCPU for the CPUs of
      `hw:cpu_dedicated_mask` (or of `hw:cpu_realtime_mask`) and VCPU for the rest;
    - the flavor fills VCPU (unless VCPU or PCPU is asked), MEMORY_MB and DISK_GB only
      where no extra spec asked for that class; DISK_GB = root + ephemeral + swap
      rounded up to GB, without the root disk of a server booted from a volume (it is
      in the block storage service);
    - `hw:mem_encryption` asks MEM_ENCRYPTION_CONTEXT 1, `hw:pmem` one
      CUSTOM_PMEM_NAMESPACE_<LABEL> per label.

    Image properties (`hw_cpu_policy`, ...) are not read: heal_allocations does not
    read them either."""
    specs = {str(k): str(v) for k, v in (flavor.get("extra_specs") or {}).items()}
    vcpus = _count(flavor.get("vcpus"))
    groups: dict[str, dict[str, int]] = {"": {}}
    for key, value in specs.items():
        match = RESOURCE_SPEC.fullmatch(key)
        amount = _amount(value)
        if match and amount is not None and _known(match[2]) and (numbered or not match[1]):
            groups.setdefault(match[1] or "", {})[match[2]] = amount
    unnumbered = groups[""]
    policy = specs.get("hw:cpu_policy")
    if policy == "dedicated":
        isolated = specs.get("hw:emulator_threads_policy") == "isolate"
        unnumbered["PCPU"] = vcpus + (1 if isolated else 0)
    elif policy == "mixed":
        pinned = len(_pinned_cpus(specs, vcpus))
        unnumbered.update(VCPU=vcpus - pinned, PCPU=pinned)
    merged: collections.Counter[str] = collections.Counter()
    for group in groups.values():
        merged.update(group)
    if "VCPU" not in merged and "PCPU" not in merged:
        merged["VCPU"] = vcpus
    if "MEMORY_MB" not in merged:
        merged["MEMORY_MB"] = _count(flavor.get("ram"))
    if "DISK_GB" not in merged:
        root = 0 if volume_backed else _count(flavor.get("disk"))
        swap_gb = math.ceil(_count(flavor.get("swap")) / 1024)
        merged["DISK_GB"] = root + _count(flavor.get("ephemeral")) + swap_gb
    if specs.get("hw:mem_encryption", "").strip().lower() in TRUE:
        merged["MEM_ENCRYPTION_CONTEXT"] += 1
    for label in filter(None, (x.strip() for x in specs.get("hw:pmem", "").split(","))):
        merged[orc.normalize_name(f"PMEM_NAMESPACE_{label}")] += 1
    return {rc: n for rc, n in merged.items() if n > 0}


def _count(value: Any) -> int:
    """A flavor field: absent, null or "" count 0 (swap is "" in older compute APIs)."""
    return int(value or 0)


def _amount(value: str) -> int | None:
    """An extra spec's amount; None (ignored, as Nova does) unless a whole number >= 0."""
    try:
        amount = int(value)
    except ValueError:
        return None
    return amount if amount >= 0 else None


def _known(name: str) -> bool:
    return name.startswith(orc.CUSTOM_NAMESPACE) or name in orc.STANDARDS


def _pinned_cpus(specs: Mapping[str, str], vcpus: int) -> set[int]:
    """The guest CPUs a `mixed` flavor pins: its dedicated mask, else its realtime
    mask (a mask of exclusions, `^0-1`, starts from all CPUs); unreadable: none."""
    mask = specs.get("hw:cpu_dedicated_mask")
    if not mask and specs.get("hw:cpu_realtime", "").strip().lower() in TRUE:
        mask = specs.get("hw:cpu_realtime_mask")
    if not mask:
        return set()
    mask = mask.strip()
    if mask.startswith("^"):
        mask = f"0-{vcpus - 1},{mask}"
    chosen: set[int] = set()
    dropped: set[int] = set()
    try:
        for item in filter(None, (x.strip() for x in mask.split(","))):
            into = dropped if item.startswith("^") else chosen
            first, _, last = item.lstrip("^").partition("-")
            into.update(range(int(first), int(last or first) + 1))
    except ValueError:
        return set()
    return {cpu for cpu in chosen - dropped if 0 <= cpu < vcpus}
