"""Compute microversions: `OpenStack-API-Version: compute 2.N` (or the older
`X-OpenStack-Nova-API-Version: 2.N`); 2.1 when absent, the maximum for `latest`."""

from __future__ import annotations

import re
from typing import NamedTuple

from tally.compute.errors import BadRequest, NotAcceptable

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 96)


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def parse(openstack_header: str | None, nova_header: str | None) -> Version:
    asked = None
    if openstack_header:
        for part in openstack_header.split(","):
            service, _, value = part.strip().partition(" ")
            if service.lower() == "compute":
                asked = value.strip()
    if asked is None and nova_header:
        asked = nova_header.strip()
    if not asked:
        return Version(*MIN_VERSION)
    if asked.lower() == "latest":
        return Version(*MAX_VERSION)
    match = re.fullmatch(r"(\d+)\.(\d+)", asked)
    if not match:
        raise BadRequest(
            f"API Version String {asked} is of invalid format. Must be of format MajorNum.MinorNum."
        )  # noqa: E501
    version = Version(int(match.group(1)), int(match.group(2)))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise NotAcceptable(
            f"Version {asked} is not supported by the API. Minimum is "
            f"{text(MIN_VERSION)} and maximum is {text(MAX_VERSION)}."
        )
    return version
