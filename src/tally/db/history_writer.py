"""The claim history's writer: every change a ledger write makes (an allocation, an
inventory, a provider created, re-parented or deleted, a provider's traits or
aggregates) becomes one row of `tally_history`, in the write's own transaction.

A write notes its changes with `note` as it makes them; `transaction()` writes them
with `flush` just before it commits, so a write that is refused or rolled back (or
runs again after losing a race) leaves no row, and a committed one leaves exactly
one per change. Notes of one transaction are merged by what they change (a
consumer's class on a provider, a provider's class, a provider's traits, ...): the
first note gives the state before, the last the state after, and a change that ends
where it began (the reshaper's interim inventory) is no row at all.

Who asked is `CALLER`, a context variable the Placement app sets for each request
(`middleware.HistoryScope`): its request id, the caller's global request id (Nova
sends its own as `X-OpenStack-Request-ID`), user and project, and whether the
history is on (`history` setting). One small context object instead of a parameter
through every ledger signature: the ledger's functions stay what the API needs, and
a write outside a request (a script, a test) is recorded with no caller.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime as dt
from typing import Any

import orjson
import sqlalchemy as sa

from tally.db import schema as t
from tally.db.bound_lists import in_bound_list
from tally.db.transaction import insert_at_commit, notes

ALLOCATION = "allocation"
INVENTORY = "inventory"
PROVIDER_CREATE = "provider.create"
PROVIDER_UPDATE = "provider.update"
PROVIDER_DELETE = "provider.delete"
TRAITS = "traits"
AGGREGATES = "aggregates"
ACTIONS = (
    ALLOCATION,
    INVENTORY,
    PROVIDER_CREATE,
    PROVIDER_UPDATE,
    PROVIDER_DELETE,
    TRAITS,
    AGGREGATES,
)
_SETS = (TRAITS, AGGREGATES)  # detail: what was added and removed


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who a write is done for; `record` is the `history` setting."""

    request_id: str | None = None
    global_request_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    record: bool = True


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "tally_history_caller", default=None
)
_NOBODY = Caller()  # a write outside a request: recorded, with no caller


def caller() -> Caller:
    return CALLER.get() or _NOBODY


def recording() -> bool:
    """Whether the writes of this request are recorded (checked before the work of
    describing a change)."""
    return caller().record


@dataclasses.dataclass(slots=True)  # (not frozen: a batch makes tens of thousands)
class Change:
    """One change a write made. `provider_id` names the provider inside the
    transaction (its uuid and generation after the write are read at flush, unless
    given: a deleted provider); `was` and `now` are the details before and after (an
    inventory record, a provider's name and parent, a set of names)."""

    action: str
    provider_id: int | None = None
    provider_uuid: str | None = None
    provider_generation: int | None = None
    consumer_uuid: str | None = None
    consumer_project_id: str | None = None
    consumer_user_id: str | None = None
    consumer_type: str | None = None
    consumer_generation: int | None = None
    resource_class: str | None = None
    amount_before: int | None = None
    amount_after: int | None = None
    was: Any = None
    now: Any = None

    @property
    def key(self) -> tuple:
        group = self.action.partition(".")[0]
        return (group, self.consumer_uuid, self.provider_id, self.resource_class)

    @property
    def changed(self) -> bool:
        if self.action in (PROVIDER_CREATE, PROVIDER_DELETE):
            return True
        return (self.amount_before, self.was) != (self.amount_after, self.now)


def note(conn: sa.Connection, *changes: Change) -> None:
    """Note `changes` for this transaction (each merged with an earlier note of the
    same thing)."""
    if not caller().record:
        return
    pending = notes(conn, "history", dict, _flush)
    for change in changes:
        key = change.key
        first = pending.get(key)
        if first is not None:
            action = PROVIDER_CREATE if first.action == PROVIDER_CREATE else change.action
            change = dataclasses.replace(
                change, action=action, amount_before=first.amount_before, was=first.was
            )
        pending[key] = change


def _flush(conn: sa.Connection, pending: dict[tuple, Change]) -> int:
    """Write what this transaction noted; the number of rows. Run inside the
    transaction, just before it commits."""
    if not pending:
        return 0
    changes = [c for c in pending.values() if c.changed]
    if not changes:
        return 0
    providers = _providers(conn, {c.provider_id for c in changes if _needs_provider(c)})
    who = caller()
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    rows = [_row(c, who, now, providers.get(c.provider_id)) for c in changes]
    insert_at_commit(conn, t.history, rows)
    return len(rows)


def _needs_provider(change: Change) -> bool:
    return change.provider_id is not None and (
        change.provider_uuid is None or change.provider_generation is None
    )


def _providers(conn: sa.Connection, ids: set[int]) -> dict[int, sa.Row]:
    """uuid and generation, as this transaction leaves them, of providers by id."""
    if not ids:
        return {}
    return {row.id: row for row in conn.execute(_PROVIDERS, {"ids": sorted(ids)})}


_RP = t.resource_providers
_PROVIDERS = sa.select(_RP.c.id, _RP.c.uuid, _RP.c.generation).where(in_bound_list(_RP.c.id, "ids"))


def _row(change: Change, caller: Caller, now: dt.datetime, provider: sa.Row | None) -> dict:
    return {
        "created_at": now,
        "action": change.action,
        "request_id": caller.request_id,
        "global_request_id": caller.global_request_id,
        "user_id": caller.user_id,
        "project_id": caller.project_id,
        "consumer_uuid": change.consumer_uuid,
        "consumer_project_id": change.consumer_project_id,
        "consumer_user_id": change.consumer_user_id,
        "consumer_type": change.consumer_type,
        "consumer_generation": change.consumer_generation,
        "provider_uuid": change.provider_uuid or (provider.uuid if provider else None),
        "provider_generation": (
            change.provider_generation
            if change.provider_generation is not None or provider is None
            else provider.generation
        ),
        "resource_class": change.resource_class,
        "amount_before": _whole(change.amount_before),
        "amount_after": _whole(change.amount_after),
        "detail": _detail(change),
    }


def _whole(amount: float | None) -> int | None:
    """An amount as the integer column keeps it (a request may say 8.0)."""
    return None if amount is None else int(amount)


def _detail(change: Change) -> str | None:
    if change.action == ALLOCATION:
        return None
    if change.action in _SETS:
        was, now = set(change.was or ()), set(change.now or ())
        found: dict[str, Any] = {"added": sorted(now - was), "removed": sorted(was - now)}
    else:
        found = {"before": change.was, "after": change.now}
    return orjson.dumps(found).decode()
