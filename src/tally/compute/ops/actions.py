"""Instance actions, recorded as Nova records them: every server operation is an
action found by the request id of the compute API call (what the user holds), with
the caller's user and project, and events named as Nova's (`conductor_...`,
`compute_...`), each with its result ("Success" or "Error") and, when it failed, the
traceback and a message (details, 2.84). An action with a failed event says "Error".

    with recorded(lab, who, CREATE, uuids) as action:
        with action.event(SCHEDULE_AND_BUILD, CONDUCTOR):
            ...  # an exception here: the event's result is "Error", then it propagates
        action.add(BUILD, host)

The lab does each operation within its call, so an action is written once, finished,
when its `with` block ends (also when it raises). The lab acting on its own (no
request id: its clock, its faults) records nothing, as it is no user's operation.
"""

from __future__ import annotations

import contextlib
import hashlib
import traceback
from collections.abc import Iterable, Iterator
from typing import Any

from tally.compute.context import Identity, Lab
from tally.compute.errors import BadRequest, ComputeFault, NotFound
from tally.compute.store import actions as store
from tally.compute.store import servers as server_store

# Nova's action names (nova.compute.instance_actions)
CREATE, DELETE, MIGRATE, LIVE_MIGRATION, EVACUATE = (
    "create",
    "delete",
    "migrate",
    "live-migration",
    "evacuate",
)
CONFIRM_RESIZE, REVERT_RESIZE, SHELVE, UNSHELVE = (
    "confirmResize",
    "revertResize",
    "shelve",
    "unshelve",
)
LIVE_MIGRATION_CANCEL = "live_migration_cancel"
LIVE_MIGRATION_FORCE_COMPLETE = "live_migration_force_complete"
CONDUCTOR = "lab-conductor"  # where the lab's conductor events run
TIME = "%Y-%m-%dT%H:%M:%S.%f"  # how Nova writes an event's times


def host_id(project_id: str, host: str | None) -> str:
    """Nova's hostId: a host's name hashed with the project, so a user can tell two of
    their servers (or events) apart by host without learning the host's name."""
    return hashlib.sha224((project_id + host).encode()).hexdigest() if host else ""


class Recording:
    """The events of one action in progress, on one or more servers (multi-create)."""

    def __init__(self, lab: Lab, servers: Iterable[str]) -> None:
        self.lab = lab
        self.started = lab.now()
        self.events: dict[str, list[dict[str, Any]]] = {uuid: [] for uuid in servers}

    def add(
        self,
        name: str,
        host: str | None,
        *,
        server: str | None = None,
        failure: BaseException | None = None,
        started: Any = None,
    ) -> None:
        """A finished event, on every server of the action (or on `server` only)."""
        event = {
            "event": name,
            "start_time": (started or self.lab.now()).strftime(TIME),
            "finish_time": self.lab.now().strftime(TIME),
            "result": "Error" if failure else "Success",
            "traceback": _traceback(failure) if failure else None,
            "host": host,
            "details": _details(failure) if failure else None,
        }
        for uuid in [server] if server else self.events:
            self.events[uuid].append(dict(event))

    @contextlib.contextmanager
    def event(self, name: str, host: str | None) -> Iterator[None]:
        """An event around the work of the block: "Error" if the block raises."""
        started = self.lab.now()
        try:
            yield
        except Exception as exc:
            self.add(name, host, failure=exc, started=started)
            raise
        self.add(name, host, started=started)


@contextlib.contextmanager
def recorded(lab: Lab, who: Identity, action: str, servers: Iterable[str]) -> Iterator[Recording]:
    """Record `action` on `servers` for the caller's request once the block ends."""
    recording = Recording(lab, servers)
    try:
        yield recording
    finally:
        if who.request_id:
            _write(lab, who, action, recording)


def _write(lab: Lab, who: Identity, action: str, recording: Recording) -> None:
    finished = lab.now()
    rows = []
    for uuid, events in recording.events.items():
        for event in events:  # hashed with the action's project, as Nova shows it
            event["hostId"] = host_id(who.project_id, event["host"])
        rows.append(
            {
                "server_uuid": uuid,
                "action": action,
                "request_id": who.request_id,
                "user_id": who.user_id,
                "project_id": who.project_id,
                "start_time": recording.started,
                "finish_time": finished,
                "message": "Error" if any(e["result"] == "Error" for e in events) else None,
                "events": events,
                "created_at": recording.started,
                "updated_at": finished,
            }
        )
    store.create(lab.engine, rows)


def _traceback(failure: BaseException) -> str:
    return "".join(traceback.format_exception(failure))


def _details(failure: BaseException) -> str:
    """What Nova shows of a failed event (2.84): the message of its own faults, the
    kind of any other exception."""
    if isinstance(failure, ComputeFault):
        return failure.message
    return type(failure).__name__


def server_of(lab: Lab, who: Identity, uuid: str, *, deleted: bool) -> dict[str, Any]:
    """The server whose actions are asked for: one of the caller's project (any, for
    an admin); a deleted one too when `deleted` (Nova from 2.21)."""
    server = server_store.get(lab.engine, uuid, deleted=deleted)
    if server is None or (server["project_id"] != who.project_id and not who.is_admin):
        raise NotFound(f"Instance {uuid} could not be found.")
    return server


def listing(
    lab: Lab, server: dict[str, Any], since: Any = None, before: Any = None
) -> list[dict[str, Any]]:
    """The server's actions, newest first, changed in [since, before] when given."""
    if since and before and before < since:
        raise BadRequest("The value of changes-since must be less than or equal to changes-before.")
    return store.listing(lab.engine, server["uuid"], changed_since=since, changed_before=before)


def get(lab: Lab, server: dict[str, Any], request_id: str) -> dict[str, Any]:
    found = store.get(lab.engine, server["uuid"], request_id)
    if found is None:
        raise NotFound(f"Action {request_id} not found")
    return found
