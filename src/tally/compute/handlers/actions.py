"""POST /servers/{server_id}/action: os-migrateLive, migrate, evacuate,
confirmResize, revertResize, shelve, unshelve. Each body is checked as Nova's schema
for the request's microversion checks it (a member an older or newer version lacks is
a 400)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any

import falcon

from tally.compute.errors import BadRequest
from tally.compute.handlers.common import Resource, body
from tally.compute.microversion import Version
from tally.compute.ops import moves
from tally.compute.ops import servers as server_ops

BOOLEANS = (True, False, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes")
BOOLEANS += ("False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no")


def _members(
    name: str, args: Any, required: Iterable[str], optional: Iterable[str] = ()
) -> dict[str, Any]:
    """`args` as an object with the `required` members and no others but `optional`."""
    if not isinstance(args, dict):
        raise BadRequest(f"Invalid input for field/attribute {name}. Value: {args}. Not an object")
    shown = json.dumps(args)
    for key in required:
        if key not in args:
            raise BadRequest(
                f"Invalid input for field/attribute {name}. Value: {shown}. "
                f"'{key}' is a required property"
            )
    extra = sorted(set(args) - set(required) - set(optional))
    if extra:
        raise BadRequest(
            f"Invalid input for field/attribute {name}. Value: {shown}. Additional "
            f"properties are not allowed ('{extra[0]}' was unexpected)"
        )
    return args


def _boolean(args: dict[str, Any], key: str, also: tuple = ()) -> None:
    if key in args and args[key] not in BOOLEANS + also:
        raise BadRequest(
            f"Invalid input for field/attribute {key}. Value: {args[key]}. "
            f"{args[key]!r} is not one of the accepted values"
        )


def live_migration_host(v: Version, args: Any) -> str | None:
    """os-migrateLive: 2.1 needs block_migration and disk_over_commit (booleans);
    2.25 drops disk_over_commit and accepts block_migration "auto"; 2.30 .. 2.67
    take `force`."""
    required = ["block_migration", "host"] + (["disk_over_commit"] if v < (2, 25) else [])
    optional = ["force"] if (2, 30) <= v < (2, 68) else []
    args = _members("os-migrateLive", args, required, optional)
    _boolean(args, "block_migration", ("auto",) if v >= (2, 25) else ())
    for key in ("disk_over_commit", "force"):
        _boolean(args, key)
    return args["host"]


def migration_host(v: Version, args: Any) -> str | None:
    """migrate: a destination `host` from 2.56 (before, the body is not read)."""
    if v < (2, 56) or args is None:
        return None
    return _members("migrate", args, [], ["host"]).get("host")


def evacuation(v: Version, args: Any) -> tuple[str | None, dict | None]:
    """evacuate: before 2.14 `onSharedStorage` is required and the answer carries the
    new adminPass; 2.29 .. 2.67 take `force`. (host, the answer's body)."""
    required = ["onSharedStorage"] if v < (2, 14) else []
    optional = ["host", "adminPass"] + (["force"] if (2, 29) <= v < (2, 68) else [])
    args = _members("evacuate", args, required, optional)
    for key in ("onSharedStorage", "force"):
        _boolean(args, key)
    answer = {"adminPass": args.get("adminPass") or secrets.token_urlsafe(9)}
    return args.get("host"), answer if v < (2, 14) else None


class ServerAction(Resource):
    """POST /servers/{server_id}/action: one action per body."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        action = body(req)
        if len(action) != 1:
            raise BadRequest("The action body names exactly one action.")
        ((name, args),) = action.items()
        who, v = req.context.identity, req.context.version
        resp.status = falcon.HTTP_202
        if name == "os-migrateLive":
            moves.start(self.lab, who, server_id, moves.LIVE, live_migration_host(v, args))
        elif name == "migrate":
            moves.start(self.lab, who, server_id, moves.COLD, migration_host(v, args))
        elif name == "evacuate":
            host, answer = evacuation(v, args)
            moves.start(self.lab, who, server_id, moves.EVACUATION, host)
            resp.status = falcon.HTTP_200
            if answer is not None:
                resp.media = answer
        elif name == "confirmResize":
            moves.confirm_resize(self.lab, who, server_id)
            resp.status = falcon.HTTP_204
        elif name == "revertResize":
            moves.revert_resize(self.lab, who, server_id)
        elif name == "shelve":
            server_ops.shelve(self.lab, who, server_id)
        elif name == "unshelve":  # a zone (2.77) or host (2.91) to go to is not taken
            server_ops.unshelve(self.lab, who, server_id)
        else:
            raise BadRequest(f"There is no such action: {name}")
