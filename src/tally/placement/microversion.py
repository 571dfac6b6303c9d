"""Placement microversions: the list we serve and the header parsing.

Version-dependent behaviour elsewhere is a lookup on `Version` values (they
compare as `(major, minor)` tuples: `mv >= (1, 15)`).
"""

from __future__ import annotations

import functools

import microversion_parse
from microversion_parse import Version

SERVICE_TYPE = "placement"
HEADER = "openstack-api-version"

VERSIONS: tuple[str, ...] = (
    "1.0",  # the first release: providers, inventories, allocations, usages
    "1.1",  # provider aggregates
    "1.2",  # /resource_classes with custom classes
    "1.3",  # member_of on GET /resource_providers
    "1.4",  # resources on GET /resource_providers
    "1.5",  # DELETE /resource_providers/{uuid}/inventories
    "1.6",  # /traits and provider traits
    "1.7",  # PUT /resource_classes/{name} creates, without a body
    "1.8",  # project_id and user_id required in PUT /allocations
    "1.9",  # GET /usages
    "1.10",  # GET /allocation_candidates
    "1.11",  # 'allocations' link of a provider
    "1.12",  # dict form of allocations in PUT; project/user in GET /allocations
    "1.13",  # POST /allocations for many consumers
    "1.14",  # parent and root provider uuids; in_tree filter
    "1.15",  # last-modified and cache-control headers
    "1.16",  # limit on allocation candidates
    "1.17",  # required traits on allocation candidates
    "1.18",  # required traits on GET /resource_providers
    "1.19",  # provider generation in aggregate bodies
    "1.20",  # POST /resource_providers returns the provider
    "1.21",  # member_of on allocation candidates
    "1.22",  # forbidden traits (!TRAIT)
    "1.23",  # error codes in error bodies
    "1.24",  # repeated member_of (AND)
    "1.25",  # granular request groups
    "1.26",  # reserved may equal total
    "1.27",  # all inventories in provider_summaries
    "1.28",  # consumer generations
    "1.29",  # nested providers in allocation candidates
    "1.30",  # POST /reshaper
    "1.31",  # in_tree on allocation candidates
    "1.32",  # forbidden aggregates (member_of=!...)
    "1.33",  # string suffixes of request groups
    "1.34",  # mappings in allocation requests
    "1.35",  # root_required
    "1.36",  # same_subtree
    "1.37",  # re-parenting and un-parenting providers
    "1.38",  # consumer types
    "1.39",  # any-of traits (in:) and repeated required
)

NEWEST = VERSIONS[-1]  # what the service, the clients, the CLI, the page and the lab speak
MIN_VERSION = microversion_parse.parse_version_string(VERSIONS[0])
MAX_VERSION = microversion_parse.parse_version_string(NEWEST)


class MicroversionError(Exception):
    """A bad `OpenStack-API-Version` header: `status` is 400 or 406."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@functools.lru_cache(maxsize=64)  # clients send a handful of values: each parsed once
def parse(header: str | None) -> Version:
    """The version a request asks for in its `OpenStack-API-Version` header (None:
    absent); the minimum when it asks for none. (The Version returned is shared:
    no caller changes it.)"""
    headers = {} if header is None else {HEADER: header}
    try:
        return microversion_parse.extract_version(headers, SERVICE_TYPE, VERSIONS)
    except ValueError as exc:
        raise MicroversionError(406, f"Invalid microversion: {exc}") from None
    except TypeError as exc:
        raise MicroversionError(400, f"Invalid microversion: {exc}") from None


def header_value(version: Version) -> str:
    return f"{SERVICE_TYPE} {version.major}.{version.minor}"


def as_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)
