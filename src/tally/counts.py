"""The counters of `/metrics`, counted where things happen (below every layer: the
storage layer counts its retries, Placement's middleware its requests, claims and
guard refusals); `tally.serve.metrics` renders them with what it reads when scraped.

Several worker processes share their counts through prometheus_client's multiprocess
mode: `tally serve` makes a directory of its own under /tmp and names it in
`PROMETHEUS_MULTIPROC_DIR` before the workers fork (`prepare_multiprocess`); each
worker writes its counters there and a scrape sums them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from typing import Any

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_lock = threading.Lock()
_metrics: dict[str, Any] = {}


def prepare_multiprocess() -> str:
    """A fresh directory for this run's workers (removed when this process exits);
    call before any metric is counted and before forking."""
    directory = tempfile.mkdtemp(prefix="tally-metrics-", dir="/tmp")
    os.environ[MULTIPROC_ENV] = directory
    pid = os.getpid()
    atexit.register(lambda: os.getpid() == pid and shutil.rmtree(directory, True))
    return directory


def _get() -> dict[str, Any]:
    """The metrics, made on first use (after the fork, in the worker)."""
    if _metrics:
        return _metrics
    with _lock:
        if _metrics:
            return _metrics
        from prometheus_client import CollectorRegistry, Counter, Histogram, values

        values.ValueClass = values.get_value_class()  # multiprocess if the env says so
        registry = CollectorRegistry(auto_describe=True)
        _metrics.update(
            registry=registry,
            requests=Counter(
                "tally_http_requests",
                "HTTP requests by route template, method and status.",
                ["route", "method", "status"],
                registry=registry,
            ),
            latency=Histogram(
                "tally_http_request_duration_seconds",
                "Time to answer, by route template and method.",
                ["route", "method"],
                registry=registry,
            ),
            claims=Counter(
                "tally_claims",
                "Allocation writes: accepted, refused_capacity, refused_generation.",
                ["outcome"],
                registry=registry,
            ),
            guard=Counter(
                "tally_capacity_guard_refusals",
                "Inventory changes refused by the capacity guard, per resource class.",
                ["resource_class"],
                registry=registry,
            ),
            retries=Counter(
                "tally_database_retries",
                "Write transactions run again after a deadlock, serialization failure or race.",
                registry=registry,
            ),
            unsatisfied=Counter(
                "tally_unsatisfied_requests",
                "GET /allocation_candidates that found nothing, by the dominant reason.",
                ["reason"],
                registry=registry,
            ),
        )
    return _metrics


CLAIM_ROUTES = {("PUT", "/allocations/{consumer_uuid}"), ("POST", "/allocations")}


def request(route: str, method: str, status: int, seconds: float, error: Any = None) -> None:
    m = _get()
    m["requests"].labels(route, method, str(status)).inc()
    m["latency"].labels(route, method).observe(seconds)
    if (method, route) in CLAIM_ROUTES:
        if status < 300:
            m["claims"].labels("accepted").inc()
        elif status == 409:
            code = getattr(error, "code", "")
            generation = code == "placement.concurrent_update"
            m["claims"].labels("refused_generation" if generation else "refused_capacity").inc()
    for usage in (getattr(error, "extra", None) or {}).get("usage", ()):
        if getattr(error, "code", "") == "placement.inventory.inuse":
            m["guard"].labels(usage["resource_class"]).inc()


def database_retry() -> None:
    _get()["retries"].inc()


def unsatisfied_request(reason: str | None) -> None:
    """A search found nothing; `reason` is its verdict's dominant reason (None: unknown)."""
    _get()["unsatisfied"].labels(reason or "unknown").inc()


def registry() -> Any:
    """This process's registry of the counters (made on first use)."""
    return _get()["registry"]
