"""`tally provider aggregate list|set`."""

from __future__ import annotations

import click

from tally.cli import inputs
from tally.cli.context import PROVIDER, Context, Output, output_options, pass_context


@click.group()
def aggregate() -> None:
    """The aggregates a resource provider belongs to (microversion 1.1)."""


@aggregate.command("list")
@click.argument("uuid", type=PROVIDER)
@output_options
@pass_context
def list_(ctx: Context, out: Output, uuid: str) -> None:
    """List the aggregates of provider UUID."""
    ctx.client.require("1.1", "provider aggregate list")
    found = ctx.client.get(f"/resource_providers/{uuid}/aggregates")["aggregates"]
    out.rows(("uuid",), [{"uuid": agg} for agg in found])


@aggregate.command("set")
@click.argument("uuid", type=PROVIDER)
@click.option(
    "--aggregate",
    "aggregates",
    multiple=True,
    type=inputs.Uuid(),
    help="Aggregate UUID; repeatable.",
)
@click.option(
    "--generation",
    type=int,
    help="The provider generation the change is based on (1.19); default: the current "
    "one, read just before writing.",
)
@output_options
@pass_context
def set_(ctx: Context, out: Output, uuid: str, aggregates: tuple, generation: int | None):
    """Replace the aggregates of provider UUID with the --aggregate ones (none: leave all)."""
    client = ctx.client
    client.require("1.1", "provider aggregate set")
    path = f"/resource_providers/{uuid}/aggregates"
    if not client.at_least("1.19"):
        found = client.put(path, list(aggregates))
    else:
        if generation is None:
            generation = client.get(path)["resource_provider_generation"]
        body = {"aggregates": list(aggregates), "resource_provider_generation": generation}
        found = client.put(path, body)
    out.rows(("uuid",), [{"uuid": agg} for agg in found["aggregates"]])
