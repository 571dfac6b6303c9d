"""The capacity gauges of `/metrics`: how many more of each shape of the setting
`capacity_shapes` fit, counted as `tally capacity` counts them
(`tally.doctor.fill.read_capacity` over this server's own Placement,
in-process, as an admin), read when scraped.

The setting is a comma-separated list; each item is one shape, and its text is
the gauges' `shape` label:

- `flavor:NAME`: the claim of one server of flavor NAME (or id), read from the
  lab compute in-process (VCPU, MEMORY_MB, DISK_GB, `resources:` and `trait:`
  extra specs, as `tally capacity --flavor`). Without the lab there is no
  compute API to ask, and the shape is skipped.
- `CLASS=N+CLASS=N...`: resource classes and amounts (`CLASS:N` too, as
  `tally.nova.shapes` reads every shape) joined by `+` (a comma would end the item),
  like `VCPU=4+MEMORY_MB=8192`.

A shape that does not parse, names no flavor, or that Placement refuses is
logged once (again only after it has been counted in between) and skipped: a
scrape never fails for it. The counts are kept `capacity_cache_seconds` per
worker process; they are computed in the process answering the scrape and
exposed as plain gauges of that scrape (not through the multiprocess files),
so nothing is summed across workers.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tally.clients.inprocess import as_caller, once
from tally.doctor.fill import Shape, flavor_shape, read_capacity
from tally.nova.shapes import parse_shape

log = logging.getLogger("tally.metrics")
FLAVOR = "flavor:"


@dataclasses.dataclass(frozen=True)
class Count:
    """How many more of one shape fit: in all, and on each of the first hosts."""

    shape: str  # the item of `capacity_shapes`, as written
    total: int
    providers: tuple[tuple[str, str, int], ...]  # (uuid, name, fits) in the answer's order


def parse_item(text: str) -> str | Shape:
    """A flavor's name (for `flavor:NAME`) or the Shape of `CLASS=N+CLASS=N`;
    ValueError saying what is wrong."""
    text = text.strip()
    if text.startswith(FLAVOR):
        name = text[len(FLAVOR) :].strip()
        if not name:
            raise ValueError("`flavor:` names no flavor")
        return name
    return Shape(parse_shape(text, sep="+"))


def in_process_compute(compute_app: Any, version: str) -> Callable[[], Any]:
    """A getter of one ComputeClient on the lab compute app (in-process, as an admin)."""

    def make() -> Any:
        import httpx

        from tally.clients.compute import ComputeClient

        caller = as_caller(compute_app, "tally-metrics", "tally-metrics", "admin")
        transport = httpx.WSGITransport(app=caller)
        return ComputeClient(
            "http://compute.metrics/v2.1", token=None, version=version, transport=transport
        )

    return once(make)


class FillGauges:
    """The counts of `settings.capacity_shapes`, at most `capacity_cache_seconds`
    old. `placement` gets the PlacementClient to count over; `compute` (None
    without the lab) the ComputeClient flavors are read from."""

    def __init__(
        self,
        settings: Any,
        placement: Callable[[], Any],
        compute: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings, self.placement, self.compute, self.clock = (
            settings,
            placement,
            compute,
            clock,
        )
        self._lock = threading.Lock()
        self._counted: tuple[float, list[Count]] | None = None
        self._reported: set[str] = set()  # shapes whose failure the log already tells

    def __call__(self) -> list[Count]:
        shapes = self.settings.capacity_shapes
        if not shapes:
            return []
        with self._lock:  # one count at a time; concurrent scrapes share it
            now = self.clock()
            if self._counted and now - self._counted[0] < self.settings.capacity_cache_seconds:
                return self._counted[1]
            counts = [c for c in map(self._count, dict.fromkeys(shapes)) if c is not None]
            self._counted = (self.clock(), counts)
            return counts

    def _count(self, text: str) -> Count | None:
        try:
            shape = self._shape(text)
            if shape is None:
                return None
            report = read_capacity(self.placement(), shape)
        except Exception as exc:  # a scrape never fails for one shape
            self._skip(text, str(exc) or type(exc).__name__)
            return None
        self._reported.discard(text)
        names = {row.uuid: row.provider or "" for row in report.rows}
        first = report.fill.hosts[: max(0, self.settings.metrics_max_providers)]
        hosts = tuple((h.uuid, names.get(h.uuid, ""), h.fits) for h in first)
        return Count(text, report.total, hosts)

    def _shape(self, text: str) -> Shape | None:
        parsed = parse_item(text)
        if isinstance(parsed, Shape):
            return parsed
        if self.compute is None:
            self._skip(text, "flavor shapes need the lab compute (setting lab), which is off")
            return None
        return flavor_shape(self.compute(), parsed)

    def _skip(self, text: str, why: str) -> None:
        if text not in self._reported:
            self._reported.add(text)
            log.warning("capacity_shapes: %r is skipped: %s", text, why)
