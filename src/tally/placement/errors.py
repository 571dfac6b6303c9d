"""Placement error codes (the `code` of an error body, from microversion 1.23).

Append-only: a client may match on any of these strings; never change or drop one.
A leaf (it imports nothing of tally): the clients read their codes here too.
"""

DEFAULT = "placement.undefined_code"
INVENTORY_IN_USE = "placement.inventory.inuse"
CONCURRENT_UPDATE = "placement.concurrent_update"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
RESOURCE_PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
ILLEGAL_DUPLICATE_QUERYPARAM = "placement.query.duplicate_key"
QUERYPARAM_BAD_VALUE = "placement.query.bad_value"
QUERYPARAM_MISSING_VALUE = "placement.query.missing_value"

ALL: tuple[str, ...] = (
    DEFAULT,
    INVENTORY_IN_USE,
    CONCURRENT_UPDATE,
    DUPLICATE_NAME,
    PROVIDER_IN_USE,
    PROVIDER_CANNOT_DELETE_PARENT,
    RESOURCE_PROVIDER_NOT_FOUND,
    ILLEGAL_DUPLICATE_QUERYPARAM,
    QUERYPARAM_BAD_VALUE,
    QUERYPARAM_MISSING_VALUE,
)
