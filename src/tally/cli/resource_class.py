"""`tally resource class list|show|create|delete` (microversion 1.2)."""

from __future__ import annotations

import click

from tally.cli import inputs
from tally.cli.context import Context, Output, output_options, pass_context

BASE = "/resource_classes"


@click.group()
def resource() -> None:
    """Resources that providers have and consumers use."""


@resource.group("class")
def resource_class() -> None:
    """Resource classes: standard ones (VCPU, MEMORY_MB, DISK_GB, ...) and CUSTOM_*."""


@resource_class.command("list")
@output_options
@pass_context
def list_(ctx: Context, out: Output) -> None:
    """List resource classes."""
    ctx.client.require("1.2", "resource class list")
    out.rows(("name",), ctx.client.get(BASE)["resource_classes"])


@resource_class.command("show")
@click.argument("name", type=inputs.ClassName())
@output_options
@pass_context
def show(ctx: Context, out: Output, name: str) -> None:
    """Show resource class NAME (exit 1 if it does not exist)."""
    ctx.client.require("1.2", "resource class show")
    out.record(ctx.client.get(f"{BASE}/{name}"), ("name",))


@resource_class.command("create")
@click.argument("name", type=inputs.ClassName(custom=True))
@pass_context
def create(ctx: Context, name: str) -> None:
    """Create custom resource class NAME (CUSTOM_ followed by A-Z, 0-9 and _)."""
    ctx.client.require("1.2", "resource class create")
    ctx.client.post(BASE, {"name": name})


@resource_class.command("delete")
@click.argument("name", type=inputs.ClassName())
@pass_context
def delete(ctx: Context, name: str) -> None:
    """Delete custom resource class NAME (refused while inventories use it)."""
    ctx.client.require("1.2", "resource class delete")
    ctx.client.delete(f"{BASE}/{name}")
