"""`tally provider allocation show|set|unset|delete`: a consumer's allocations."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from tally.cli import inputs
from tally.cli.context import PROVIDER, Context, Output, output_options, pass_context
from tally.clients import allocations as allocs
from tally.clients.placement import PlacementClient


class AllocationType(click.ParamType):
    """`rp=PROVIDER_UUID,CLASS=AMOUNT[,CLASS=AMOUNT...]`."""

    name = "allocation"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, dict[str, int]]:
        if isinstance(value, tuple):
            return value
        pairs = [part.partition("=") for part in str(value).split(",")]
        found = {key.strip(): amount.strip() for key, sep, amount in pairs if sep}
        rp = found.pop("rp", None)
        if not rp or not found or len(found) + 1 != len(pairs):
            self.fail(f"{value!r} is not rp=PROVIDER_UUID,CLASS=AMOUNT[,...]", param, ctx)
        if not inputs.is_uuid(rp):
            self.fail(f"{value!r}: rp {rp!r} is not a uuid", param, ctx)
        for rc in found:
            fault = inputs.class_fault(rc)
            if fault:
                self.fail(f"{value!r}: {fault}", param, ctx)
        try:
            return rp, {rc: inputs.amount(amount) for rc, amount in found.items()}
        except ValueError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)


def columns(client: PlacementClient) -> tuple[str, ...]:
    found = ("resource_provider", "generation", "resources")
    if client.at_least("1.12"):
        found += ("project_id", "user_id")
    if client.at_least("1.38"):
        found += ("consumer_type",)
    return found


def show_allocations(client: PlacementClient, out: Output, consumer: str) -> None:
    """One row per provider the consumer holds allocations on."""
    body = client.consumer_allocations(consumer)
    facts = {k: body.get(k) for k in ("project_id", "user_id", "consumer_type")}
    rows = [
        {"resource_provider": rp, **facts, **entry} for rp, entry in body["allocations"].items()
    ]
    out.rows(columns(client), rows)


@click.group()
def allocation() -> None:
    """Allocations of a consumer (a server, a migration, ...) on resource providers."""


@allocation.command("show")
@click.argument("consumer", type=inputs.Uuid())
@output_options
@pass_context
def show(ctx: Context, out: Output, consumer: str) -> None:
    """Show the allocations of CONSUMER (a UUID), one row per provider."""
    show_allocations(ctx.client, out, consumer)


@allocation.command("set")
@click.argument("consumer", type=inputs.Uuid())
@click.option(
    "--allocation",
    "allocations",
    multiple=True,
    required=True,
    type=AllocationType(),
    metavar="rp=UUID,CLASS=AMOUNT[,...]",
    help="What the consumer holds on one provider, e.g. `rp=<uuid>,VCPU=2,MEMORY_MB=2048`. "
    "Repeat for several providers.",
)
@click.option("--project-id", help="Project of the consumer (needed from 1.8; default: its own).")
@click.option("--user-id", help="User of the consumer (needed from 1.8; default: its own).")
@click.option(
    "--consumer-type",
    help="Type of the consumer, e.g. INSTANCE or MIGRATION (needed from 1.38; default: its own).",
)
@output_options
@pass_context
def set_(ctx: Context, out: Output, consumer: str, allocations: tuple, **given: str | None):
    """Replace all allocations of CONSUMER with the --allocation ones.

    From 1.28 the consumer generation is read first and sent, so a concurrent change
    to the consumer makes this fail (409) instead of being overwritten.
    """
    client, held = ctx.client, {}
    for rp, resources in allocations:
        held.setdefault(rp, {}).update(resources)
    current = allocs.read(client, consumer)
    facts = {k: v if v is not None else getattr(current, k) for k, v in given.items()}
    needs = {"project_id": "1.8", "user_id": "1.8", "consumer_type": "1.38"}
    missing = [k for k, v in needs.items() if client.at_least(v) and not facts.get(k)]
    if missing:
        options = ", ".join("--" + k.replace("_", "-") for k in missing)
        raise click.UsageError(f"give {options}: microversion {client.version} needs it")
    allocs.write(client, dataclasses.replace(current, allocations=held, **facts))
    show_allocations(client, out, consumer)


@allocation.command("unset")
@click.argument("consumer", type=inputs.Uuid())
@click.option(
    "--provider",
    "providers",
    multiple=True,
    type=PROVIDER,
    help="Remove what it holds on this provider (uuid or name).",
)
@click.option(
    "--resource-class",
    "classes",
    multiple=True,
    type=inputs.ClassName(),
    help="Remove only this class (on the --provider ones, or on every provider).",
)
@output_options
@pass_context
def unset(ctx: Context, out: Output, consumer: str, providers: tuple, classes: tuple) -> None:
    """Remove part of CONSUMER's allocations, keeping the rest (microversion 1.12).

    With neither option every allocation is removed. The rest is written back with
    the consumer generation read just before (1.28), so a concurrent change to the
    consumer makes this fail (409) instead of being lost.
    """
    client = ctx.client
    client.require("1.12", "provider allocation unset")
    current = allocs.read(client, consumer)
    kept = {rp: dict(resources) for rp, resources in current.allocations.items()}
    chosen = set(kept) & set(providers) if providers else set(kept)
    for rp in chosen:
        for rc in classes or list(kept[rp]):
            kept[rp].pop(rc, None)
    kept = {rp: res for rp, res in kept.items() if res}
    if kept != current.allocations:  # the generation read is sent (1.28): no lost update
        allocs.write(client, dataclasses.replace(current, allocations=kept))
    show_allocations(client, out, consumer)


@allocation.command("delete")
@click.argument("consumer", type=inputs.Uuid())
@pass_context
def delete(ctx: Context, consumer: str) -> None:
    """Delete every allocation of CONSUMER (no generation check: prefer `unset`)."""
    ctx.client.delete(f"/allocations/{consumer}")
