"""The shapes of the Placement API's JSON answers, per microversion, as JSON
schemas: the success responses of the OpenAPI document (`placement.openapi`).

Loose where the API is open-ended (classes, providers and consumers are map keys;
amounts are integers), exact in which fields each object has at a microversion,
switched by the same version constants the handlers use.
"""

from __future__ import annotations

from typing import Any

from tally.placement.handlers import candidates, providers
from tally.placement.ledger import history_records as history
from tally.placement.schemas import aggregates as aggregate_schemas
from tally.placement.schemas import inventories as inventory_schemas

Version = tuple[int, int]
Schema = dict[str, Any]

STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
UUID: Schema = {"type": "string", "format": "uuid"}
NULLABLE_UUID: Schema = {"type": ["string", "null"], "format": "uuid"}


def obj(*optional: str, **properties: Schema) -> Schema:
    """An object with exactly these properties, all required but `optional`."""
    required = [name for name in properties if name not in optional]
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def mapping(values: Schema) -> Schema:
    return {"type": "object", "additionalProperties": values}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


LINKS = array(obj(rel=STR, href=STR))
AMOUNTS = mapping(INT)  # {resource class: amount}
GENERATION = INT
# An inventory record as answers show it: the fields of a request record, typed.
_RECORD_FIELDS = {
    name: {"type": spec["type"]}
    for name, spec in inventory_schemas.RECORD_PROPERTIES.items()
    if name != "resource_provider_generation"
}
INVENTORIES = obj(
    resource_provider_generation=GENERATION, inventories=mapping(obj(**_RECORD_FIELDS))
)
INVENTORY = obj(**_RECORD_FIELDS, resource_provider_generation=GENERATION)
RESOURCE_CLASS = obj(name=STR, links=LINKS)
RESOURCE_CLASSES = obj(resource_classes=array(RESOURCE_CLASS))
TRAITS = obj(traits=array(STR))
PROVIDER_TRAITS = obj(traits=array(STR), resource_provider_generation=GENERATION)
PROVIDER_USAGES = obj(resource_provider_generation=GENERATION, usages=AMOUNTS)
VERSIONS = obj(
    versions=array(obj(id=STR, max_version=STR, min_version=STR, status=STR, links=LINKS))
)
OPENAPI: Schema = {"type": "object", "required": ["openapi", "info", "paths"]}
_TEXT_OR_NULL: Schema = {"type": ["string", "null"]}
_INT_OR_NULL: Schema = {"type": ["integer", "null"]}
# GET /tally/v1/history (Tally's own API): one change each, newest first.
HISTORY_ENTRY = obj(
    id=INT,
    time=STR,
    action={"type": "string", "enum": list(history.ACTIONS)},
    request_id=_TEXT_OR_NULL,
    global_request_id=_TEXT_OR_NULL,
    user_id=_TEXT_OR_NULL,
    project_id=_TEXT_OR_NULL,
    consumer=_TEXT_OR_NULL,
    consumer_project_id=_TEXT_OR_NULL,
    consumer_user_id=_TEXT_OR_NULL,
    consumer_type=_TEXT_OR_NULL,
    consumer_generation=_INT_OR_NULL,
    provider=_TEXT_OR_NULL,
    provider_generation=_INT_OR_NULL,
    resource_class=_TEXT_OR_NULL,
    before=_INT_OR_NULL,
    after=_INT_OR_NULL,
    detail={"type": ["object", "null"]},
)
HISTORY = obj(history=array(HISTORY_ENTRY), next_marker=_TEXT_OR_NULL)


def provider(v: Version) -> Schema:
    properties = {"uuid": UUID, "name": STR, "generation": GENERATION, "links": LINKS}
    if v >= providers.TREES:
        properties["parent_provider_uuid"] = NULLABLE_UUID
        properties["root_provider_uuid"] = UUID
    return obj(**properties)


def provider_list(v: Version) -> Schema:
    return obj(resource_providers=array(provider(v)))


def aggregates(v: Version) -> Schema:
    if v >= aggregate_schemas.GENERATION_VERSION:
        return obj(aggregates=array(UUID), resource_provider_generation=GENERATION)
    return obj(aggregates=array(UUID))


def consumer_allocations(v: Version) -> Schema:
    """Owner, generation and type are shown only for a consumer holding something."""
    extra = {}
    if v >= (1, 12):
        extra |= {"project_id": STR, "user_id": STR}
    if v >= (1, 28):
        extra["consumer_generation"] = GENERATION
    if v >= (1, 38):
        extra["consumer_type"] = STR
    held = mapping(obj(resources=AMOUNTS, generation=GENERATION))
    return obj(*extra, allocations=held, **extra)


def provider_allocations(v: Version) -> Schema:
    entry = {"resources": AMOUNTS}
    if v >= (1, 28):
        entry["consumer_generation"] = {"type": ["integer", "null"]}
    return obj(allocations=mapping(obj(**entry)), resource_provider_generation=GENERATION)


def usages(v: Version) -> Schema:
    """From 1.38 grouped by consumer type, each group with its `consumer_count`."""
    return obj(usages=mapping(AMOUNTS) if v >= (1, 38) else AMOUNTS)


def allocation_candidates(v: Version) -> Schema:
    if v >= candidates.DICT_ALLOCATIONS:
        held = mapping(obj(resources=AMOUNTS))
    else:
        held = array(obj(resource_provider=obj(uuid=UUID), resources=AMOUNTS))
    request = {"allocations": held}
    if v >= candidates.MAPPINGS:
        request["mappings"] = mapping(array(UUID))
    summary = {"resources": mapping(obj(capacity=INT, used=INT))}
    if v >= candidates.SUMMARY_TRAITS:
        summary["traits"] = array(STR)
    if v >= candidates.SUMMARY_TREES:
        summary["parent_provider_uuid"] = NULLABLE_UUID
        summary["root_provider_uuid"] = UUID
    return obj(
        allocation_requests=array(obj(**request)), provider_summaries=mapping(obj(**summary))
    )
