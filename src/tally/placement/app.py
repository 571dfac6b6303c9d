"""The Placement WSGI app: one factory, one route table, one error path."""

from __future__ import annotations

from typing import Any

import falcon
import orjson
import sqlalchemy as sa

from tally.config import Settings
from tally.db.engine import engine_for
from tally.placement import cors, error_responses, middleware, openapi, policy
from tally.placement.context import Service, new_index
from tally.placement.error_types import TallyError
from tally.placement.handlers import (
    aggregates,
    allocations,
    amounts,
    candidates,
    failures,
    history,
    inventories,
    providers,
    reshaper,
    resource_classes,
    root,
    sandboxes,
    traits,
    usages,
)
from tally.placement.ledger.candidates import Index
from tally.placement.ledger.failure_records import Recorder
from tally.placement.ledger.history_records import Pruner

# (path, resource factory), in the order of the Placement API reference.
ROUTES = (
    ("/", root.Home),
    ("/resource_providers", providers.Providers),
    ("/resource_providers/{uuid}", providers.Provider),
    ("/resource_classes", resource_classes.ResourceClasses),
    ("/resource_classes/{name}", resource_classes.ResourceClass),
    ("/resource_providers/{uuid}/inventories", inventories.Inventories),
    ("/resource_providers/{uuid}/inventories/{resource_class}", inventories.Inventory),
    ("/resource_providers/{uuid}/aggregates", aggregates.ProviderAggregates),
    ("/traits", traits.Traits),
    ("/traits/{name}", traits.Trait),
    ("/resource_providers/{uuid}/traits", traits.ProviderTraits),
    ("/allocations", allocations.Allocations),
    ("/allocations/{consumer_uuid}", allocations.ConsumerAllocations),
    ("/resource_providers/{uuid}/allocations", allocations.ProviderAllocations),
    ("/resource_providers/{uuid}/usages", usages.ProviderUsages),
    ("/usages", usages.Usages),
    ("/allocation_candidates", candidates.AllocationCandidates),
    ("/reshaper", reshaper.Reshaper),
    # Beyond the API reference: the API itself, as OpenAPI 3.1 (per microversion).
    (openapi.PATH, openapi.Document),
    # Tally's own API, under /tally/ (outside Placement's namespace): the claim history,
    # the searches that found nothing and why a query finds no host, and the amounts of
    # many providers in one answer.
    (history.PATH, history.History),
    (failures.PATH, failures.Failures),
    (amounts.PATH, amounts.Amounts),
    (candidates.Why.PATH, candidates.Why),
    # What if (issue 41): sandboxes, and the reads inside one.
    (sandboxes.Sandboxes.PATH, sandboxes.Sandboxes),
    (sandboxes.Sandbox.PATH, sandboxes.Sandbox),
    (sandboxes.Changes.PATH, sandboxes.Changes),
    (sandboxes.Diff.PATH, sandboxes.Diff),
    (sandboxes.Commit.PATH, sandboxes.Commit),
    (sandboxes.Candidates.PATH, sandboxes.Candidates),
    (sandboxes.Why.PATH, sandboxes.Why),
    (sandboxes.Usages.PATH, sandboxes.Usages),
    (sandboxes.Amounts.PATH, sandboxes.Amounts),
)


def create_app(
    settings: Settings,
    engine: sa.Engine | None = None,
    index: Index | None = None,
    beside: dict[str, Any] | None = None,
) -> falcon.App:
    """Build the Placement app over a prepared database
    (`ledger.bootstrap.prepare_database`, run by `tally serve` and `tally db upgrade`).
    It searches `index`, or an index of its own (`context.new_index`): apps handed
    the same index (in one process, over one database) share one copy; the
    page and the doctor's in-process client reach it through this app. `beside`:
    the OpenAPI path items of what is served next to it (`/healthcheck`, `/metrics`),
    listed in its `/openapi.json`."""
    engine = engine or engine_for(settings)
    if index is None:
        index = new_index(settings)
    service = Service(
        engine=engine,
        settings=settings,
        candidates_index=index,
        failures=Recorder.from_settings(engine, settings),
    )
    app = falcon.App(
        middleware=[
            middleware.DatabaseWaits(),
            middleware.RequestIdAndLog(),
            *cors.Cors.from_settings(settings),  # a preflight stops here
            middleware.Microversion(),
            middleware.ContentNegotiation(settings.max_body_bytes, settings.max_query_bytes),
            _identity_middleware(settings),
            middleware.Authorize(policy.Policy(settings)),
            middleware.InputDomain(),
            _history_scope(settings, engine),
        ],
        cors_enable=False,
    )
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_qs_csv = False
    app.resp_options.default_media_type = None  # set per answer: see RequestIdAndLog
    json_handler = falcon.media.JSONHandler(dumps=orjson.dumps, loads=orjson.loads)
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = json_handler
    for path, resource in ROUTES:
        app.add_route(path, _resource(resource, service, beside))
    app.add_error_handler(Exception, error_responses.handle_unexpected)
    app.add_error_handler(TallyError, error_responses.handle_tally_error)
    app.set_error_serializer(error_responses.serialize_falcon_error)
    return app


def _resource(factory: type, service: Service, beside: dict[str, Any] | None) -> object:
    if factory is root.Home:
        return factory()
    if factory is openapi.Document:
        return factory(ROUTES, beside)
    return factory(service)


def _history_scope(settings: Settings, engine: sa.Engine) -> middleware.HistoryScope:
    """Who each request's writes are recorded for, and the history's pruning."""
    pruner = Pruner(
        engine,
        settings.history_keep_days,
        settings.history_keep_rows,
        every=settings.history_prune_seconds,
    )
    return middleware.HistoryScope(settings.history, pruner)


def _identity_middleware(settings: Settings) -> object:
    if settings.auth_strategy == "noauth":
        return _OpenPaths(middleware.NoAuth())
    if settings.auth_strategy in ("keystone", "lab"):
        # lab: tally.serve.compose puts the lab identity's token filter in front (as
        # auth_token is for keystone); it sets the same confirmed-identity headers.
        return _OpenPaths(middleware.KeystoneIdentity())
    raise ValueError(f"unknown auth_strategy {settings.auth_strategy!r}")


class _OpenPaths:
    """An identity middleware that lets `openapi.OPEN_PATHS` by without a token
    (it lets the version document by itself: `middleware.UNAUTHENTICATED_PATHS`)."""

    def __init__(self, identity: object) -> None:
        self.identity = identity

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.path not in openapi.OPEN_PATHS:
            self.identity.process_request(req, resp)
