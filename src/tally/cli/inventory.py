"""`tally provider inventory list|show|set|delete`, with the capacity pre-check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import click

from tally.cli import exits, inputs
from tally.cli.context import PROVIDER, Context, Output, output_options, pass_context
from tally.cli.inventory_report import render_check
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor.inventory_check import capacity, check_change, explain_refusal

FIELDS = ("allocation_ratio", "min_unit", "max_unit", "reserved", "step_size", "total")
COLUMNS = ("resource_class", *FIELDS, "capacity", "used")
PRECHECK_HELP = """
Before writing, the provider's usages and allocations are read: a change that would
take a class's capacity, int((total - reserved) * allocation_ratio), below what is
allocated from it, or remove a class in use, is refused without writing. The report
names, per class, what is used, the capacity asked for and the gap; the consumers
holding it, largest first (type, project, and whether they also hold allocations on
other providers, as a migrating server does); and what resolves it: the largest
safe `reserved`, `tally provider allocation unset` for a consumer confirmed gone,
and `tally audit` to find the orphans. Exit status 1 when refused.

--force skips this check. Tally's server refuses such a change anyway (its 409 is
explained the same way), but upstream Placement accepts a shrink below usage and
leaves the provider over-committed: against upstream, the check is what keeps you
safe.
"""


class ResourceType(click.ParamType):
    """`CLASS=TOTAL`, `CLASS=TOTAL:RESERVED` or `CLASS:FIELD=VALUE`, each name and
    amount checked as Placement would (`VCPU=-4` is bad input, not a capacity gap)."""

    name = "resource"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, dict[str, Any]]:
        if isinstance(value, tuple):
            return value
        name, sep, amount = str(value).partition("=")
        rc, _, field = name.partition(":")
        if not (sep and rc and amount):
            self.fail(f"{value!r} is not CLASS=TOTAL[:RESERVED] or CLASS:FIELD=VALUE", param, ctx)
        fault = inputs.class_fault(rc)
        if fault:
            self.fail(f"{value!r}: {fault}", param, ctx)
        if field and field not in FIELDS:
            self.fail(f"unknown inventory field {field!r}; one of {', '.join(FIELDS)}", param, ctx)
        try:
            if field == "allocation_ratio":
                return rc, {field: inputs.ratio(amount)}
            if field:
                return rc, {field: inputs.count(field, amount)}
            total, _, reserved = amount.partition(":")
            record = {"total": inputs.count("total", total)}
            if reserved:
                record["reserved"] = inputs.count("reserved", reserved)
            return rc, record
        except ValueError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)


def resource_option(help: str) -> Callable:
    """The repeatable, required `--resource CLASS=TOTAL[:RESERVED] | CLASS:FIELD=VALUE`."""
    return click.option(
        "--resource",
        "resources",
        multiple=True,
        required=True,
        type=ResourceType(),
        metavar="CLASS=TOTAL[:RESERVED] | CLASS:FIELD=VALUE",
        help=help,
    )


def asked_inventories(
    base: Mapping[str, Mapping[str, Any]], resources: tuple[tuple[str, dict], ...], amend: bool
) -> dict[str, dict[str, Any]]:
    """The whole inventory to send: `base` (the current one with --amend) with each
    --resource applied."""
    asked = {rc: dict(record) for rc, record in base.items()} if amend else {}
    for rc, fields in resources:
        asked.setdefault(rc, {}).update(fields)
    missing = sorted(rc for rc, record in asked.items() if "total" not in record)
    if missing:
        raise click.UsageError(
            f"no total for {', '.join(missing)}: give it (--resource {missing[0]}=TOTAL) "
            "or use --amend to change some fields of an existing inventory"
        )
    for rc, record in sorted(asked.items()):
        if record.get("reserved", 0) > record["total"]:
            raise click.BadParameter(
                f"{rc}: reserved {record['reserved']} is more than its total {record['total']}",
                param_hint="--resource",
            )
    return asked


def check_classes(client: PlacementClient, asked: Mapping[str, Any], have: Mapping[str, Any]):
    """Bad input (127) naming each class asked that the provider has not and this
    Placement does not know, before the pre-check reads anything more."""
    new = set(asked) - set(have)
    if not new or not client.at_least("1.2"):
        return
    known = {found["name"] for found in client.get("/resource_classes")["resource_classes"]}
    unknown = sorted(new - known)
    if unknown:
        raise click.BadParameter(
            f"no resource class {', '.join(unknown)} on this Placement (`tally resource "
            "class list` shows them; `tally resource class create CUSTOM_...` makes one)",
            param_hint="--resource",
        )


def guarded_write(
    client: PlacementClient,
    out: Output,
    uuid: str,
    asked: dict[str, dict[str, Any]],
    current: dict[str, Any],
    force: bool,
    write: Callable[[], Any],
) -> Any:
    """Pre-check (unless --force), write, and explain a 409 the server gives."""
    if not force:
        check = check_change(client, uuid, asked, current)
        if not check.ok:
            render_check(out, check)
            exits.leave(exits.FAILED)
    try:
        return write()
    except PlacementError as exc:
        if not exc.inventory_in_use:
            raise
        render_check(out, explain_refusal(client, uuid, asked, exc))
        raise click.exceptions.Exit(exits.FAILED) from exc


def inventory_rows(inventories: Mapping[str, Mapping], used: Mapping[str, int] | None = None):
    for rc, record in inventories.items():
        row = {"resource_class": rc, **record, "capacity": capacity(record)}
        if used is not None:
            row["used"] = used.get(rc, 0)
        yield row


@click.group()
def inventory() -> None:
    """Inventories of a resource provider: how much of each resource class it has."""


@inventory.command("list")
@click.argument("uuid", type=PROVIDER)
@output_options
@pass_context
def list_(ctx: Context, out: Output, uuid: str) -> None:
    """List the inventories of provider UUID, with capacity and usage per class."""
    inventories = ctx.client.inventories(uuid)["inventories"]
    out.rows(COLUMNS, inventory_rows(inventories, ctx.client.usages(uuid)))


@inventory.command("show")
@click.argument("uuid", type=PROVIDER)
@click.argument("resource_class", type=inputs.ClassName())
@output_options
@pass_context
def show(ctx: Context, out: Output, uuid: str, resource_class: str) -> None:
    """Show the inventory of RESOURCE_CLASS on provider UUID, with capacity and usage."""
    record = ctx.client.get(f"/resource_providers/{uuid}/inventories/{resource_class}")
    record.pop("resource_provider_generation", None)
    used = ctx.client.usages(uuid)
    row = next(inventory_rows({resource_class: record}, used))
    out.record(row, COLUMNS[1:])


@inventory.command("set", epilog=PRECHECK_HELP)
@click.argument("uuid", type=PROVIDER)
@resource_option(
    "An inventory: `VCPU=32` (total), `VCPU=32:8` (total 32, reserved 8), or one "
    "field: `VCPU:reserved=8`, `VCPU:allocation_ratio=16` (fields: " + ", ".join(FIELDS) + "). "
    "Repeat for several classes and fields."
)
@click.option(
    "--amend", is_flag=True, help="Change only the classes and fields given; keep the rest."
)
@click.option("--force", is_flag=True, help="Skip the capacity pre-check (see below).")
@click.option("--dry-run", is_flag=True, help="Check and show what would be set; write nothing.")
@output_options
@pass_context
def set_(
    ctx: Context, out: Output, uuid: str, resources: tuple, amend: bool, force: bool, dry_run: bool
) -> None:
    """Set the inventories of provider UUID.

    Without --amend this replaces them all: a class not given is removed. Fields
    not given take Placement's defaults (reserved 0, min_unit 1, max_unit
    2147483647, step_size 1, allocation_ratio 1.0).
    """
    client = ctx.client
    current = client.inventories(uuid)
    asked = asked_inventories(current["inventories"], resources, amend)
    check_classes(client, asked, current["inventories"])
    generation = current["resource_provider_generation"]

    def write() -> dict[str, Any] | None:
        return None if dry_run else client.put_inventories(uuid, generation, asked)

    written = guarded_write(client, out, uuid, asked, current, force, write)
    out.rows(COLUMNS[:-1], inventory_rows(asked if dry_run else written["inventories"]))


@inventory.command("delete", epilog=PRECHECK_HELP)
@click.argument("uuid", type=PROVIDER)
@click.option(
    "--resource-class",
    type=inputs.ClassName(),
    help="Delete only this class; without it every inventory of the provider is "
    "deleted (microversion 1.5 or later).",
)
@click.option("--force", is_flag=True, help="Skip the pre-check (see below).")
@output_options
@pass_context
def delete(ctx: Context, out: Output, uuid: str, resource_class: str | None, force: bool) -> None:
    """Delete an inventory of provider UUID (or all of them); refused while allocated."""
    client = ctx.client
    current = client.inventories(uuid)
    path = f"/resource_providers/{uuid}/inventories"
    if resource_class is None:
        client.require("1.5", "deleting every inventory of a provider")
    else:
        path += f"/{resource_class}"
    asked = {rc: r for rc, r in current["inventories"].items() if resource_class not in (None, rc)}
    guarded_write(client, out, uuid, asked, current, force, lambda: client.delete(path))
