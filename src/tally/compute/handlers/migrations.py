"""GET /os-migrations, and a server's in-progress live migrations: list, show,
abort (DELETE), force complete."""

from __future__ import annotations

import falcon

from tally.compute import views
from tally.compute.errors import BadRequest, Forbidden, NotFound
from tally.compute.handlers.common import Resource, body, integer
from tally.compute.ops import moves
from tally.compute.ops import servers as server_ops
from tally.compute.store import migrations as store

FILTERS = ("status", "host", "instance_uuid", "migration_type", "project_id", "user_id")


class Migrations(Resource):
    ADMIN_ONLY = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        status = req.get_param("status")
        found = store.listing(
            self.lab.engine,
            server=req.get_param("instance_uuid"),
            status=[status] if status else None,
            host=req.get_param("host") or req.get_param("source_compute"),
            migration_type=req.get_param("migration_type"),
            project_id=req.get_param("project_id"),
            user_id=req.get_param("user_id"),
        )
        marker, limit = req.get_param("marker"), integer(req, "limit")
        if marker:
            ids = [m["uuid"] for m in found]
            if marker not in ids:
                raise BadRequest(f"Marker {marker} could not be found.")
            found = found[ids.index(marker) + 1 :]
        if limit is not None:
            found = found[:limit]
        resp.media = {"migrations": [views.migration_view(req, m) for m in found]}


def _live_in_progress(lab, server: str) -> list[dict]:
    return [
        m
        for m in store.listing(lab.engine, server=server, migration_type=moves.LIVE)
        if m["status"] in views.LIVE_IN_PROGRESS
    ]


class ServerMigrations(Resource):
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
        moves.abort(self.lab, req.context.identity, server_id, migration_id)
        resp.status = falcon.HTTP_202


class ServerMigrationAction(Resource):
    def on_post(
        self, req: falcon.Request, resp: falcon.Response, server_id: str, migration_id: str
    ) -> None:
        _admin_server(self.lab, req, server_id)
        if "force_complete" not in body(req):
            raise BadRequest("The only migration action is force_complete.")
        moves.force_complete(self.lab, req.context.identity, server_id, migration_id)
        resp.status = falcon.HTTP_202


def _admin_server(lab, req: falcon.Request, server: str) -> dict:
    if req.context.version < (2, 23):
        raise NotFound("Server migrations need microversion 2.23 or later.")
    if not req.context.identity.is_admin:
        raise Forbidden("Policy doesn't allow os_compute_api:servers:migrations to be performed.")
    return server_ops.get(lab, req.context.identity, server)
