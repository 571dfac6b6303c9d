"""Compute microversions: `OpenStack-API-Version: compute 2.N` (or the older
`X-OpenStack-Nova-API-Version: 2.N`); 2.1 when absent, the maximum for `latest`.

The lab speaks 2.1 .. 2.96; `lab_compute_max_version` lowers the maximum so the lab
answers as a Nova of an older release does (the version documents advertise it, a
request above it gets 406, `latest` means it). What changed at which version is
written where the behaviour lives (views.py, the handlers), each with its version;
routes that only exist from (or until) some version say so in `VERSIONS` on their
resource, checked by the middleware (404 outside the range, as Nova answers).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from tally.compute.errors import BadRequest, NotAcceptable


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


MIN_VERSION = Version(2, 1)
MAX_VERSION = Version(2, 96)  # the newest the lab speaks


def cap(setting: object) -> Version:
    """The maximum the lab answers with, from `lab_compute_max_version`."""
    match = re.fullmatch(r"(\d+)\.(\d+)", str(setting).strip())
    version = Version(int(match.group(1)), int(match.group(2))) if match else None
    if version is None or not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(
            f"setting lab_compute_max_version must be a compute microversion from "
            f"{MIN_VERSION} to {MAX_VERSION}, not {setting!r}"
        )
    return version


def parse(
    openstack_header: str | None, nova_header: str | None, maximum: Version = MAX_VERSION
) -> Version:
    asked = None
    if openstack_header:
        for part in openstack_header.split(","):
            service, _, value = part.strip().partition(" ")
            if service.lower() == "compute":
                asked = value.strip()
    if asked is None and nova_header:
        asked = nova_header.strip()
    if not asked:
        return MIN_VERSION
    if asked.lower() == "latest":
        return maximum
    match = re.fullmatch(r"(\d+)\.(\d+)", asked)
    if not match:
        raise BadRequest(
            f"API Version String {asked} is of invalid format. Must be of format MajorNum.MinorNum."
        )
    version = Version(int(match.group(1)), int(match.group(2)))
    if not MIN_VERSION <= version <= maximum:
        raise NotAcceptable(
            f"Version {asked} is not supported by the API. Minimum is "
            f"{MIN_VERSION} and maximum is {maximum}."
        )
    return version


def served(resource: object, method: str, version: Version) -> bool:
    """Does `resource` answer `method` at `version`? Its `VERSIONS` maps a method to
    the (first, last) versions that have it; a method not listed is always there."""
    first, last = getattr(resource, "VERSIONS", {}).get(method, (MIN_VERSION, MAX_VERSION))
    return first <= version <= last
