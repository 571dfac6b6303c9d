"""`tally capacity`: how many more of a shape fit, read over the public APIs.

One `GET /allocation_candidates` for the shape (no `limit`: every way one instance
fits), filled by `tally.nova.fill.fill`; provider names from `GET
/resource_providers`; for the per-aggregate view, each host's aggregates. A
flavor's shape comes from the compute API the way Nova turns a flavor into a
request (`tally.nova.flavors`, its unnumbered group) with `trait:NAME=required|forbidden`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from tally.clients.compute import ComputeClient
from tally.clients.placement import PlacementClient
from tally.nova import fill as nova_fill
from tally.nova.flavors import claimed_resources

DISABLED = "COMPUTE_STATUS_DISABLED"  # on the provider of a disabled compute service
# Nova's numbered request groups (resources1:..., trait_GPU:...): not one group.
SUFFIXED_SPEC = re.compile(r"^(resources|trait)[^:]+:")


class UnknownFlavor(LookupError):
    pass


@dataclasses.dataclass(frozen=True)
class Shape:
    """One instance: the classes it takes and the query filters it carries
    (`required` and `member_of` as Placement's query values)."""

    resources: dict[str, int]
    required: tuple[str, ...] = ()
    member_of: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def text(self) -> str:
        return ",".join(f"{rc}={n}" for rc, n in self.resources.items())

    def query(self) -> dict[str, Any]:
        return {
            "resources": ",".join(f"{rc}:{n}" for rc, n in self.resources.items()),
            "required": list(self.required),
            "member_of": list(self.member_of),
        }


@dataclasses.dataclass(frozen=True)
class ProviderRow:
    provider: str | None  # the host's name
    uuid: str
    fits: int
    limiting: list[str]  # `CLASS`, or `CLASS on NAME` when another tree gives it


@dataclasses.dataclass(frozen=True)
class AggregateRow:
    aggregate: str | None
    providers: int
    fits: int


@dataclasses.dataclass(frozen=True)
class CapacityReport:
    shape: Shape
    total: int
    rows: list[ProviderRow] | list[AggregateRow]
    fill: nova_fill.Fill


def flavor_shape(
    compute: ComputeClient,
    name: str,
    required: tuple[str, ...] = (),
    member_of: tuple[str, ...] = (),
) -> Shape:
    """The shape of one server of flavor NAME (or id); UnknownFlavor if none."""
    listing = compute.get("/flavors/detail", {"is_public": "None"})["flavors"]
    flavor = next((f for f in listing if f.get("name") == name), None)
    flavor = flavor or next((f for f in listing if f.get("id") == name), None)
    if flavor is None:
        raise UnknownFlavor(f"no flavor named {name!r} in the compute API")
    specs = flavor.get("extra_specs")
    if specs is None:  # before compute 2.61
        specs = compute.get(f"/flavors/{flavor['id']}/os-extra_specs").get("extra_specs") or {}
    ephemeral = flavor.get("OS-FLV-EXT-DATA:ephemeral", flavor.get("ephemeral"))
    unnumbered = {**flavor, "ephemeral": ephemeral, "extra_specs": specs}
    resources = claimed_resources(unnumbered, numbered=False)  # groups: noted below
    traits = []
    for key, value in sorted(specs.items()):
        if key.startswith("trait:") and value in ("required", "forbidden"):
            trait = key.split(":", 1)[1]
            traits.append(trait if value == "required" else f"!{trait}")
    notes = tuple(
        f"flavor {name}: extra spec {key} (a numbered request group) is not counted"
        for key in sorted(specs)
        if SUFFIXED_SPEC.match(key)
    )
    asked = (",".join(traits),) if traits else ()
    return Shape(resources, tuple(required) + asked, tuple(member_of), notes)


def leave_out_disabled(client: PlacementClient, shape: Shape) -> tuple[Shape, int]:
    """The shape as Nova's scheduler asks it (its compute_status_filter): hosts whose
    compute service is disabled (COMPUTE_STATUS_DISABLED) forbidden; and how many
    such hosts there are among the shape's aggregates. Unchanged (and 0) when the
    shape names that trait already, or when this Placement cannot forbid a trait
    (before 1.22: noted)."""
    if any(DISABLED in value for value in shape.required):
        return shape, 0
    if not client.at_least("1.22"):
        version = client.version
        client.note(f"placement {version} cannot forbid a trait (1.22): disabled hosts count")
        return shape, 0
    all_of = [n for n, value in enumerate(shape.required) if not value.startswith("in:")]
    required = list(shape.required)
    if all_of:  # one `required` value, ANDed: repeating it needs 1.39
        required[all_of[0]] += f",!{DISABLED}"
    else:
        required.append(f"!{DISABLED}")
    disabled = client.get(
        "/resource_providers", {"required": DISABLED, "member_of": list(shape.member_of)}
    )["resource_providers"]
    return dataclasses.replace(shape, required=tuple(required)), len(disabled)


def read_capacity(
    client: PlacementClient,
    shape: Shape,
    by: str = "provider",
    candidates: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> CapacityReport:
    """How many more of `shape` fit, per host (`by="provider"`) or per aggregate;
    `candidates` asks `GET /allocation_candidates` elsewhere (inside a sandbox)."""
    client.require("1.10", "counting what fits from allocation candidates")
    if candidates is None:
        answer = client.get("/allocation_candidates", shape.query())
    else:
        answer = candidates(shape.query())
    filled = nova_fill.fill(answer)
    names = {}
    if filled.hosts:
        listing = client.get("/resource_providers")["resource_providers"]
        names = {p["uuid"]: p.get("name") for p in listing}
    if by == "aggregate":
        aggregates = {
            h.uuid: client.get(f"/resource_providers/{h.uuid}/aggregates")["aggregates"]
            for h in filled.hosts
        }
        rows: list = [
            AggregateRow(a.aggregate, len(a.hosts), a.fits)
            for a in nova_fill.by_aggregate(filled.hosts, aggregates)
        ]
    else:
        rows = [
            ProviderRow(names.get(h.uuid), h.uuid, h.fits, limiting(filled, h, names))
            for h in filled.hosts
        ]
        rows.sort(key=lambda r: (r.provider or "", r.uuid))
    return CapacityReport(shape, filled.total, rows, filled)


def limiting(
    filled: nova_fill.Fill, host: nova_fill.HostFit, names: Mapping[str, str | None]
) -> list[str]:
    """The classes that stop the host's candidates, named on the provider giving
    them when that is another tree (a sharing provider)."""
    found: dict[str, None] = {}
    for rp, rc in host.limiting:
        if filled.root_of.get(rp, rp) == host.uuid:
            found[rc] = None
        else:
            found[f"{rc} on {names.get(rp) or rp}"] = None
    return sorted(found)
