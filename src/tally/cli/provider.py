"""`tally provider list|show|create|set|delete`, and the provider's sub-groups."""

from __future__ import annotations

from typing import Any

import click

from tally.cli import inputs
from tally.cli.aggregate import aggregate
from tally.cli.allocation import allocation
from tally.cli.context import PROVIDER, Context, Output, output_options, pass_context
from tally.cli.filters import member_of_params, required_params, resources_param
from tally.cli.inventory import inventory
from tally.cli.trait import provider_trait
from tally.cli.usage import provider_usage
from tally.clients.placement import PlacementClient

BASE = "/resource_providers"


def fields(client: PlacementClient) -> tuple[str, ...]:
    """The columns of a provider at the session's microversion."""
    found = ("uuid", "name", "generation")
    if client.at_least("1.14"):
        found += ("root_provider_uuid", "parent_provider_uuid")
    return found


@click.group()
def provider() -> None:
    """Resource providers: compute hosts, NUMA cells, shared storage, ..."""


provider.add_command(inventory)
provider.add_command(provider_usage)
provider.add_command(provider_trait)
provider.add_command(aggregate)
provider.add_command(allocation)


@provider.command("list")
@click.option("--uuid", type=inputs.Uuid(), help="Only the provider with this UUID.")
@click.option("--name", help="Only the provider with this name.")
@click.option(
    "--resource",
    "resources",
    multiple=True,
    metavar="CLASS=AMOUNT",
    help="Only providers with the capacity to serve this amount now (1.4). Repeatable.",
)
@click.option(
    "--in-tree",
    type=inputs.Uuid(),
    metavar="UUID",
    help="Only providers in the tree of this provider (1.14).",
)
@click.option(
    "--required",
    multiple=True,
    metavar="TRAIT",
    help="A trait the provider must have (1.18); `!TRAIT` forbids it (1.22); `A,B` or "
    "`in:A,B` means any of them (1.39). Repeatable: all must hold.",
)
@click.option(
    "--forbidden", multiple=True, metavar="TRAIT", help="A trait the provider must not have (1.22)."
)
@click.option(
    "--member-of",
    multiple=True,
    metavar="AGGREGATES",
    help="Aggregate UUIDs, comma-separated: the provider is in one of them (1.3); `!AGG` "
    "excludes (1.32). Repeatable: each must hold (1.24).",
)
@output_options
@pass_context
def list_(ctx: Context, out: Output, **filters: Any) -> None:
    """List resource providers, optionally filtered."""
    params = {
        "uuid": filters["uuid"],
        "name": filters["name"],
        "resources": resources_param(filters["resources"]),
        "in_tree": filters["in_tree"],
        "required": required_params(filters["required"], filters["forbidden"]),
        "member_of": member_of_params(filters["member_of"]),
    }
    found = ctx.client.get(BASE, params)["resource_providers"]
    out.rows(fields(ctx.client), found)


@provider.command("show")
@click.argument("uuid", type=PROVIDER)
@click.option(
    "--allocations", is_flag=True, help="Also show what each consumer holds on the provider."
)
@output_options
@pass_context
def show(ctx: Context, out: Output, uuid: str, allocations: bool) -> None:
    """Show resource provider UUID."""
    found = ctx.client.provider(uuid)
    names = fields(ctx.client)
    if allocations:
        found["allocations"] = ctx.client.provider_allocations(uuid)
        names += ("allocations",)
    out.record(found, names)


@provider.command("create")
@click.argument("name")
@click.option(
    "--uuid", type=inputs.Uuid(), help="UUID of the new provider (default: the server picks one)."
)
@click.option("--parent-provider", type=inputs.Uuid(), help="UUID of its parent provider (1.14).")
@output_options
@pass_context
def create(ctx: Context, out: Output, name: str, uuid: str | None, parent_provider: str | None):
    """Create a resource provider called NAME."""
    body = {"name": name, "uuid": uuid, "parent_provider_uuid": parent_provider}
    response = ctx.client.post(BASE, {k: v for k, v in body.items() if v is not None})
    if response.content:  # 1.20 and later answer with the provider
        created = response.json()
    else:
        created = ctx.client.provider(response.headers["location"].rstrip("/").split("/")[-1])
    out.record(created, fields(ctx.client))


@provider.command("set")
@click.argument("uuid", type=PROVIDER)
@click.option("--name", help="The new name (default: keep the name).")
@click.option(
    "--parent-provider",
    type=inputs.Uuid(),
    help="UUID of the new parent provider (1.14; replacing an existing parent needs 1.37).",
)
@output_options
@pass_context
def set_(ctx: Context, out: Output, uuid: str, name: str | None, parent_provider: str | None):
    """Rename resource provider UUID or change its parent."""
    if name is None and parent_provider is None:
        raise click.UsageError("nothing to change: give --name and/or --parent-provider")
    body: dict[str, Any] = {"name": name or ctx.client.provider(uuid)["name"]}
    if parent_provider is not None:
        body["parent_provider_uuid"] = parent_provider
    out.record(ctx.client.put(f"{BASE}/{uuid}", body), fields(ctx.client))


@provider.command("delete")
@click.argument("uuid", type=PROVIDER)
@pass_context
def delete(ctx: Context, uuid: str) -> None:
    """Delete resource provider UUID (refused while it holds allocations or has children)."""
    ctx.client.delete(f"{BASE}/{uuid}")
