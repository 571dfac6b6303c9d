"""The root `tally` group: its connection options are global, given before the
command or after it (`tally provider list --os-placement-api-version 1.10`), as the
openstack client takes its `--os-*` options; and every exit status goes through
`tally.cli.exits`."""

from __future__ import annotations

from typing import Any

import click

from tally.cli import exits


class Root(click.Group):
    """A group whose value-taking options may also follow the subcommand, and
    whose commands' errors end with the status `exits.deciding` gives them."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with exits.deciding():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with exits.deciding():
            return super().invoke(ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(self, args))


def hoist_global_options(group: click.Group, args: list[str]) -> list[str]:
    """`args` with every global option given after the subcommand (and its value)
    moved just before it; a later one still wins, as on the command line. Nothing
    after `--` moves."""
    names = {
        name
        for param in group.params
        if isinstance(param, click.Option) and not param.is_flag
        for name in param.opts
    }
    command = _first_command(args, names)
    if command is None:
        return list(args)
    kept, moved = list(args[:command]), []
    rest = iter(args[command:])
    for arg in rest:
        if arg == "--":
            kept += [arg, *rest]
            break
        if arg in names:
            moved += [arg, *[value for value in [next(rest, None)] if value is not None]]
        elif arg.split("=", 1)[0] in names and "=" in arg:
            moved.append(arg)
        else:
            kept.append(arg)
    return kept[:command] + moved + kept[command:]


def _first_command(args: list[str], names: set[str]) -> int | None:
    """Where the subcommand's name is in `args` (after the root's own options)."""
    skip = False
    for n, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in names:
            skip = True  # its value follows
        elif arg == "--":
            return None
        elif not arg.startswith("-"):
            return n
    return None
