"""The `tally` command."""

from __future__ import annotations

from typing import Any

import click

from tally import DISTRIBUTION
from tally.cli.audit import audit
from tally.cli.candidate import allocation
from tally.cli.capacity import capacity
from tally.cli.context import connection_options, open_context
from tally.cli.db import db
from tally.cli.drain import drain
from tally.cli.explain import explain
from tally.cli.failures import failures
from tally.cli.heal import heal
from tally.cli.history import history
from tally.cli.lab import lab
from tally.cli.plan import plan
from tally.cli.provider import provider
from tally.cli.resource_class import resource
from tally.cli.root import Root
from tally.cli.serve import serve
from tally.cli.trait import trait
from tally.cli.usage import usage
from tally.cli.why import why


@click.group(cls=Root)
@click.version_option(package_name=DISTRIBUTION, prog_name="tally")
@connection_options
@click.pass_context
def cli(ctx: click.Context, **connection: Any) -> None:
    """Tally: Placement-compatible resource accounting, with a capacity guard.

    The provider, resource, trait, usage and allocation commands speak to any
    Placement endpoint (Tally, upstream Placement, a production cloud): --url
    (default http://127.0.0.1:8778, noauth token `admin`) or --os-cloud through
    Keystone. These options may also follow the command, as in the openstack
    client (`tally provider list --os-placement-api-version 1.10`). Exit status:
    0 done, 1 refused (the server's message, or the inventory pre-check's report)
    or a service cannot be reached, 127 bad input; `audit` and `heal` answer as
    nova-manage's (docs/reference.md, Exit status).
    """
    open_context(ctx, **connection)


cli.add_command(serve)
cli.add_command(db)
cli.add_command(provider)
cli.add_command(resource)
cli.add_command(trait)
cli.add_command(usage)
cli.add_command(allocation)
cli.add_command(lab)
cli.add_command(audit)
cli.add_command(explain)
cli.add_command(heal)
cli.add_command(drain)
cli.add_command(history)
cli.add_command(failures)
cli.add_command(why)
cli.add_command(capacity)
cli.add_command(plan)
