"""The lab compute WSGI app: one factory, one route table, one error path.
Mounted under /compute by tally.serve.compose (so its paths start at /v2.1)."""

from __future__ import annotations

import falcon
import sqlalchemy as sa

from tally.clients.errors import ClientError
from tally.compute import middleware
from tally.compute.context import Lab
from tally.compute.errors import ComputeFault
from tally.compute.handlers import (
    actions,
    flavors,
    instance_actions,
    lab,
    migrations,
    servers,
    services,
    versions,
)
from tally.compute.report import ReportClient
from tally.config import Settings

V = "/v2.1"
# (path, resource factory), in the order of the compute API reference.
ROUTES = (
    ("/", versions.Versions),
    (V, versions.Version),
    (f"{V}/servers", servers.Servers),
    (f"{V}/servers/detail", servers.ServersDetail),
    (f"{V}/servers/{{server_id}}", servers.Server),
    (f"{V}/servers/{{server_id}}/action", actions.ServerAction),
    (f"{V}/servers/{{server_id}}/os-instance-actions", instance_actions.InstanceActions),
    (
        f"{V}/servers/{{server_id}}/os-instance-actions/{{request_id}}",
        instance_actions.InstanceAction,
    ),
    (f"{V}/servers/{{server_id}}/migrations", migrations.ServerMigrations),
    (f"{V}/servers/{{server_id}}/migrations/{{migration_id}}", migrations.ServerMigration),
    (
        f"{V}/servers/{{server_id}}/migrations/{{migration_id}}/action",
        migrations.ServerMigrationAction,
    ),
    (f"{V}/flavors", flavors.Flavors),
    (f"{V}/flavors/detail", flavors.FlavorsDetail),
    (f"{V}/flavors/{{flavor_id}}", flavors.Flavor),
    (f"{V}/flavors/{{flavor_id}}/os-extra_specs", flavors.FlavorExtraSpecs),
    (f"{V}/os-hypervisors", services.Hypervisors),
    (f"{V}/os-hypervisors/detail", services.HypervisorsDetail),
    (f"{V}/os-hypervisors/{{hypervisor_id}}", services.Hypervisor),
    (f"{V}/os-migrations", migrations.Migrations),
    (f"{V}/os-services", services.Services),
    (f"{V}/os-services/{{service_id}}", services.Service),
    # the lab's own admin API
    (f"{V}/os-lab", lab.LabSummary),
    (f"{V}/os-lab/hosts", lab.LabHosts),
    (f"{V}/os-lab/hosts/{{name}}", lab.LabHost),
    (f"{V}/os-lab/tracker", lab.LabTracker),
    (f"{V}/os-lab/step", lab.LabStep),
    (f"{V}/os-lab/faults", lab.LabFaults),
    (f"{V}/os-lab/reset", lab.LabReset),
)


def create_app(settings: Settings, engine: sa.Engine, placement: ReportClient) -> falcon.App:
    """The compute API over a prepared database, claiming through `placement`."""
    service = Lab(engine=engine, settings=settings, placement=placement)
    app = falcon.App(
        middleware=[
            middleware.RequestIdAndLog(),
            middleware.Microversion(service.max_version),
            middleware.Auth(noauth=settings.auth_strategy == "noauth"),
        ],
        cors_enable=False,
    )
    app.req_options.strip_url_path_trailing_slash = True
    app.req_options.auto_parse_qs_csv = False
    for path, resource in ROUTES:
        app.add_route(path, resource(service))
    app.add_error_handler(Exception, middleware.handle_unexpected)
    app.add_error_handler(ClientError, middleware.handle_client_error)
    app.add_error_handler(ComputeFault, middleware.handle_compute_fault)
    app.set_error_serializer(middleware.serialize_falcon_error)
    return app
