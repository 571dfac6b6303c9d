"""`tally trait list|show|create|delete` and `tally provider trait list|set|delete`."""

from __future__ import annotations

import click

from tally.cli import inputs
from tally.cli.context import PROVIDER, Context, Output, output_options, pass_context

TRAITS_NEED = "1.6"


def _rows(names: list[str]) -> list[dict[str, str]]:
    return [{"name": name} for name in names]


@click.group()
def trait() -> None:
    """Traits: qualitative properties of providers (standard ones and CUSTOM_*)."""


@trait.command("list")
@click.option(
    "--name",
    help="Filter: `startswith:CUSTOM_` or `in:HW_CPU_X86_AVX,HW_CPU_X86_SSE`.",
)
@click.option("--associated", is_flag=True, help="Only traits some provider has.")
@output_options
@pass_context
def list_(ctx: Context, out: Output, name: str | None, associated: bool) -> None:
    """List traits."""
    ctx.client.require(TRAITS_NEED, "trait list")
    params = {"name": name, "associated": "true" if associated else None}
    out.rows(("name",), _rows(ctx.client.get("/traits", params)["traits"]))


@trait.command("show")
@click.argument("name", type=inputs.TraitName())
@output_options
@pass_context
def show(ctx: Context, out: Output, name: str) -> None:
    """Show that trait NAME exists (exit 1 if it does not)."""
    ctx.client.require(TRAITS_NEED, "trait show")
    ctx.client.request("GET", f"/traits/{name}")
    out.record({"name": name})


@trait.command("create")
@click.argument("name", type=inputs.TraitName(custom=True))
@pass_context
def create(ctx: Context, name: str) -> None:
    """Create custom trait NAME (CUSTOM_ followed by A-Z, 0-9 and _); no error if it exists."""
    ctx.client.require(TRAITS_NEED, "trait create")
    ctx.client.request("PUT", f"/traits/{name}")


@trait.command("delete")
@click.argument("name", type=inputs.TraitName())
@pass_context
def delete(ctx: Context, name: str) -> None:
    """Delete custom trait NAME (refused while a provider has it)."""
    ctx.client.require(TRAITS_NEED, "trait delete")
    ctx.client.delete(f"/traits/{name}")


@click.group("trait")
def provider_trait() -> None:
    """The traits of a resource provider."""


@provider_trait.command("list")
@click.argument("uuid", type=PROVIDER)
@output_options
@pass_context
def provider_list(ctx: Context, out: Output, uuid: str) -> None:
    """List the traits of provider UUID."""
    ctx.client.require(TRAITS_NEED, "provider trait list")
    out.rows(("name",), _rows(ctx.client.get(f"/resource_providers/{uuid}/traits")["traits"]))


@provider_trait.command("set")
@click.argument("uuid", type=PROVIDER)
@click.option(
    "--trait", "traits", multiple=True, type=inputs.TraitName(), help="A trait; repeat for several."
)
@output_options
@pass_context
def provider_set(ctx: Context, out: Output, uuid: str, traits: tuple[str, ...]) -> None:
    """Replace the traits of provider UUID with the --trait ones (none: remove all)."""
    ctx.client.require(TRAITS_NEED, "provider trait set")
    path = f"/resource_providers/{uuid}/traits"
    generation = ctx.client.get(path)["resource_provider_generation"]
    body = {"traits": list(traits), "resource_provider_generation": generation}
    out.rows(("name",), _rows(ctx.client.put(path, body)["traits"]))


@provider_trait.command("delete")
@click.argument("uuid", type=PROVIDER)
@pass_context
def provider_delete(ctx: Context, uuid: str) -> None:
    """Remove every trait from provider UUID."""
    ctx.client.require(TRAITS_NEED, "provider trait delete")
    ctx.client.delete(f"/resource_providers/{uuid}/traits")
