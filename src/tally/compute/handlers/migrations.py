"""GET /os-migrations, and a server's in-progress live migrations: list and show
(2.23), abort (DELETE, 2.24), force complete (2.22)."""

from __future__ import annotations

from typing import Any

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest, Forbidden, NotFound
from tally.compute.handlers.common import Resource, body, moment, page
from tally.compute.microversion import MAX_VERSION, Version
from tally.compute.ops import moves
from tally.compute.ops import servers as server_ops
from tally.compute.store import migrations as store

# GET /os-migrations: the query parameters of 2.1, then what each version added.
# Before 2.59 any other parameter is ignored; from 2.59 it is refused (400).
QUERY_SINCE = (
    ((2, 1), ("hidden", "host", "instance_uuid", "source_compute", "status", "migration_type")),
    ((2, 59), ("limit", "marker", "changes-since")),
    ((2, 66), ("changes-before",)),
    ((2, 80), ("user_id", "project_id")),
)


def _query(req: falcon.Request) -> dict[str, Any]:
    """The filters of GET /os-migrations at the request's version."""
    v = req.context.version
    known = {name for since, names in QUERY_SINCE if v >= since for name in names}
    unknown = sorted(set(req.params) - known)
    if unknown and v >= (2, 59):
        raise BadRequest(
            "Invalid input for query parameters: additional properties are not allowed "
            f"({', '.join(repr(u) for u in unknown)} {'was' if len(unknown) == 1 else 'were'} "
            "unexpected)"
        )
    status = req.get_param("status")
    query = {
        "server": req.get_param("instance_uuid"),
        "status": [status] if status else None,
        "host": req.get_param("host"),
        "source": None if req.get_param("host") else req.get_param("source_compute"),
        "migration_type": req.get_param("migration_type"),
        "project_id": req.get_param("project_id"),  # before 2.59 the database filters by
        "user_id": req.get_param("user_id"),  # them too, as Nova's does
    }
    if "changes-since" in known:
        query["changed_since"] = moment(req, "changes-since")
    if "changes-before" in known:
        query["changed_before"] = moment(req, "changes-before")
        since, before = query["changed_since"], query["changed_before"]
        if since and before and before < since:
            raise BadRequest(
                "The value of changes-since must be less than or equal to changes-before."
            )
    return query


def _page(req: falcon.Request, found: list[dict]) -> tuple[list[dict], list[dict] | None]:
    """limit/marker paging (2.59)."""
    return page(req, found, "uuid", f"{views.base(req)}/v2.1/os-migrations")


class Migrations(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = store.listing(self.lab.engine, **_query(req))
        if req.context.version < (2, 59):  # no paging, in the database's order
            resp.media = {"migrations": [views.migration_view(req, m) for m in reversed(found)]}
            return
        page, more = _page(req, found)
        resp.media = {"migrations": [views.migration_view(req, m) for m in page]}
        if more:
            resp.media["migrations_links"] = more


def _live_in_progress(lab, server: str) -> list[dict]:
    return [
        m
        for m in store.listing(lab.engine, server=server, migration_type=moves.LIVE)
        if m["status"] in views.LIVE_IN_PROGRESS
    ]


class ServerMigrations(Resource):
    VERSIONS = {"GET": (Version(2, 23), MAX_VERSION)}

    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        server = _admin_server(self.lab, req, server_id)
        ram = server["flavor"]["ram"]
        resp.media = {
            "migrations": [
                views.server_migration_view(req, m, ram)
                for m in _live_in_progress(self.lab, server_id)
            ]
        }


class ServerMigration(Resource):
    VERSIONS = {"GET": (Version(2, 23), MAX_VERSION), "DELETE": (Version(2, 24), MAX_VERSION)}

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, server_id: str, migration_id: str
    ) -> None:
        server = _admin_server(self.lab, req, server_id)
        found = [
            m
            for m in _live_in_progress(self.lab, server_id)
            if migration_id in (str(m["id"]), m["uuid"])
        ]
        if not found:
            raise NotFound(
                f"In-progress live migration {migration_id} is not found for server {server_id}."
            )
        resp.media = {
            "migration": views.server_migration_view(req, found[0], server["flavor"]["ram"])
        }

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, server_id: str, migration_id: str
    ) -> None:
        _admin_server(self.lab, req, server_id)
        queued = req.context.version >= (2, 65)  # aborting a queued/preparing one
        moves.abort(self.lab, req.context.identity, server_id, migration_id, queued=queued)
        resp.status = falcon.HTTP_202


class ServerMigrationAction(Resource):
    VERSIONS = {"POST": (Version(2, 22), MAX_VERSION)}

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, server_id: str, migration_id: str
    ) -> None:
        _admin_server(self.lab, req, server_id)
        if "force_complete" not in body(req):
            raise BadRequest("The only migration action is force_complete.")
        moves.force_complete(self.lab, req.context.identity, server_id, migration_id)
        resp.status = falcon.HTTP_202


def _admin_server(lab, req: falcon.Request, server: str) -> dict:
    if not req.context.identity.is_admin:
        raise Forbidden("Policy doesn't allow os_compute_api:servers:migrations to be performed.")
    return server_ops.get(lab, req.context.identity, server)
