"""`tally provider usage show` and `tally usage show`."""

from __future__ import annotations

import click

from tally.cli.context import PROVIDER, Context, Output, output_options, pass_context
from tally.doctor.inventory_check import capacity


@click.group("usage")
def provider_usage() -> None:
    """What is allocated from a resource provider."""


@provider_usage.command("show")
@click.argument("uuid", type=PROVIDER)
@output_options
@pass_context
def provider_show(ctx: Context, out: Output, uuid: str) -> None:
    """Show the usage per resource class of provider UUID, with its capacity."""
    inventories = ctx.client.inventories(uuid)["inventories"]
    rows = []
    for rc, used in ctx.client.usages(uuid).items():
        cap = capacity(inventories[rc]) if rc in inventories else None
        rows.append({"resource_class": rc, "usage": used, "capacity": cap})
    out.rows(("resource_class", "usage", "capacity"), rows)


@click.group("usage")
def usage() -> None:
    """What projects and users consume."""


@usage.command("show")
@click.argument("project_id", metavar="PROJECT", required=False)
@click.option(
    "--project", "--project-id", "project", help="The project ID (or give it as PROJECT)."
)
@click.option("--user", "--user-id", "user", help="Only this user's consumption.")
@click.option(
    "--consumer-type",
    help="Only consumers of this type, like INSTANCE or MIGRATION (1.38); `all` or "
    "`unknown` as in Placement.",
)
@output_options
@pass_context
def show(
    ctx: Context,
    out: Output,
    project_id: str | None,
    project: str | None,
    user: str | None,
    consumer_type: str | None,
):
    """Show the total usage of project PROJECT (or one of its users) per resource
    class, as `openstack resource usage show PROJECT` (`--project` too).

    From microversion 1.38 the usage is broken down by consumer type, with the
    number of consumers of each type.
    """
    if bool(project_id) == bool(project):
        raise click.UsageError("give the project once: PROJECT or --project")
    project = project_id or project
    ctx.client.require("1.9", "usage show")
    params = {"project_id": project, "user_id": user, "consumer_type": consumer_type}
    found = ctx.client.get("/usages", params)["usages"]
    if not ctx.client.at_least("1.38"):
        rows = [{"resource_class": rc, "usage": n} for rc, n in found.items()]
        out.rows(("resource_class", "usage"), rows)
        return
    rows = []
    for kind, amounts in found.items():
        count = amounts.get("consumer_count")
        for rc, n in amounts.items():
            if rc != "consumer_count":
                row = {"consumer_type": kind, "consumer_count": count}
                rows.append({**row, "resource_class": rc, "usage": n})
    out.rows(("consumer_type", "consumer_count", "resource_class", "usage"), rows)
