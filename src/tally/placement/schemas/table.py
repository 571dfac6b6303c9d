"""Every operation of the API, (method, route) -> `Operation`: the `OPERATIONS`
tables of the resources' schema modules joined, in the order of the route table.
The validator (`handlers.common`) and the OpenAPI document read it; a route of
`app.ROUTES` without its operations here fails tests/unit/test_openapi.py."""

from __future__ import annotations

from tally.placement.schemas import (
    aggregates,
    allocations,
    amounts,
    candidates,
    documents,
    failures,
    history,
    inventories,
    providers,
    reshaper,
    resource_classes,
    sandboxes,
    traits,
    usages,
)
from tally.placement.schemas.operation import Key, Operation

_RESOURCES = (
    providers,
    resource_classes,
    inventories,
    aggregates,
    traits,
    allocations,
    usages,
    candidates,
    reshaper,
    documents,
    history,
    failures,
    amounts,
    sandboxes,
)

OPERATIONS: dict[Key, Operation] = {}
for _module in _RESOURCES:
    _repeated = OPERATIONS.keys() & _module.OPERATIONS.keys()
    if _repeated:
        raise ValueError(f"{_module.__name__} declares {sorted(_repeated)} again")
    OPERATIONS.update(_module.OPERATIONS)
