"""Prometheus metrics, served at `/metrics` to admins (prometheus_client's text format).

Counted where they happen: requests per route template, method and status, and their
latency (tally.placement.middleware); claims accepted, refused for capacity, refused
for a generation (`PUT /allocations/{consumer_uuid}`, `POST /allocations`); capacity
guard refusals per resource class; database transactions run again after a deadlock
or a race (tally.db.retry). Read when scraped: capacity, reserved and used per
provider and class, of at most `metrics_max_providers` providers; and how many more
of each shape of `capacity_shapes` fit (tally.serve.fill_gauges), in all and per host.

Several worker processes share their counts through prometheus_client's multiprocess
mode: `tally serve` makes a directory of its own under /tmp and names it in
`PROMETHEUS_MULTIPROC_DIR` before the workers fork (`prepare_multiprocess`); each
worker writes its counters there and a scrape sums them. Under another WSGI server,
set PROMETHEUS_MULTIPROC_DIR (an empty directory) before it starts the workers, or each
process answers with its own counts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from tally import counts
from tally.counts import MULTIPROC_ENV

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render(
    provider_sample: Callable[[], Iterable[tuple[str, str, int, int, int]]],
    capacity_sample: Callable[[], Iterable[Any]] = list,
) -> bytes:
    """The text exposition: every process's counts, and the gauges read now, in this
    process only (never written to the multiprocess files, so never summed)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    local = counts.registry()
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_Yield(local.collect))

    def providers() -> Iterable[Any]:
        names = ("capacity", "reserved", "used")
        families = [
            GaugeMetricFamily(
                f"tally_provider_{name}",
                f"{name.capitalize()} of a resource class on a provider (read when scraped).",
                labels=["provider", "resource_class"],
            )
            for name in names
        ]
        for uuid, rc, *amounts in provider_sample():
            for family, amount in zip(families, amounts, strict=True):
                family.add_metric([uuid, rc], amount)
        return families

    def capacity() -> Iterable[Any]:
        total = GaugeMetricFamily(
            "tally_capacity_fits",
            "How many more of a shape of capacity_shapes fit (read when scraped).",
            labels=["shape"],
        )
        per_host = GaugeMetricFamily(
            "tally_capacity_fits_provider",
            "How many more of a shape of capacity_shapes fit on a host provider.",
            labels=["shape", "provider", "name"],
        )
        for count in capacity_sample():
            total.add_metric([count.shape], count.total)
            for uuid, name, fits in count.providers:
                per_host.add_metric([count.shape, uuid, name], fits)
        return [total, per_host]

    registry.register(_Yield(providers))
    registry.register(_Yield(capacity))
    return generate_latest(registry)


# Its path item in /openapi.json (tally.placement.openapi.Document's `beside`), at the
# root whatever the document's prefix; the token of the document's security scheme.
OPENAPI: dict[str, Any] = {
    "servers": [{"url": "/"}],
    "get": {
        "operationId": "get_metrics",
        "description": "Prometheus's text exposition: requests, retries, provider and "
        "capacity gauges. An admin token only.",
        "responses": {
            "200": {
                "description": "OK",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            "401": {"description": "Unauthorized: no token, or one not confirmed"},
            "403": {"description": "Forbidden: not an admin"},
        },
    },
}


class _Yield:
    def __init__(self, collect: Callable[[], Iterable[Any]]) -> None:
        self.collect = collect


class MetricsApp:
    """`/metrics`: the exposition to an admin, 401 to a caller without a token (or
    one Keystone did not confirm: auth_token adds where to get one), 403 to anyone
    else. The provider
    gauges come from `provider_sample(engine, max_providers)` (the Placement
    ledger's, passed in by the server: this module sits below the database layer,
    which counts its retries here, so it imports nothing of Placement); the capacity
    gauges from `capacity_sample()` (a tally.serve.fill_gauges.FillGauges)."""

    def __init__(
        self,
        engine: Any,
        settings: Any,
        is_admin: Callable[[dict], bool],
        provider_sample: Callable[[Any, int], list[tuple[str, str, int, int, int]]],
        capacity_sample: Callable[[], Iterable[Any]] = list,
        is_identified: Callable[[dict], bool] = lambda environ: True,
    ) -> None:
        self.engine, self.settings, self.is_admin = engine, settings, is_admin
        self.is_identified = is_identified
        self.provider_sample, self.capacity_sample = provider_sample, capacity_sample

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        if not self.is_identified(environ):
            body = b"Authentication required: an admin token (x-auth-token) reads /metrics.\n"
            start_response("401 Unauthorized", [("Content-Type", "text/plain")])
            return [body]
        if not self.is_admin(environ):
            body = b"Only an admin token may read /metrics.\n"
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            return [body]
        data = render(self.sample, self.capacity_sample)
        start_response(
            "200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(data)))]
        )
        return [data]

    def sample(self) -> list[tuple[str, str, int, int, int]]:
        limit = self.settings.metrics_max_providers
        if limit <= 0:
            return []
        return self.provider_sample(self.engine, limit)
