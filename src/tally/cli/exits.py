"""Every exit status of `tally`, decided here. `TABLE` is the table of
docs/reference.md#exit-status (tests/unit/test_exit_codes.py holds them equal).

`audit` and `heal` answer as nova-manage's `placement audit` and `placement
heal_allocations` do; bad input is 127 for every command, as nova-manage's (click
says 2); a service that cannot be reached, or that refuses, is 1. The root group
(`tally.cli.root.Root`) turns what a command raises into its status through
`deciding`; a command that ends on an outcome calls `leave`.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator

import click

from tally.clients.errors import BadInput, ClientError
from tally.db.errors import UnusableDatabase
from tally.escapes import visible

DONE = 0
FAILED = 1  # cannot reach, refused, or what the command checks does not hold
MORE_LEFT = 1  # heal: --max-count reached with servers left (nova-manage's 1)
NO_PROVIDER = 2  # heal: a server's host has no resource provider
FOUND = 3  # audit: something found that is not (all) fixed
WRITE_FAILED = 3  # heal: a write failed
ALL_FIXED = 4  # audit --delete --apply: everything found was fixed
NOTHING_TO_HEAL = 4  # heal
BAD_INPUT = 127
UNEXPECTED = 255

TABLE: tuple[tuple[int, str], ...] = (
    (DONE, "done; `audit`: nothing found; `heal`: healed (a dry run: something to heal)"),
    (
        FAILED,
        "a service (Placement, the compute API, the database) cannot be reached, or refused "
        "(its message on stderr), or lacks Tally's own API the command needs (`history`, "
        "`failures`, and what if: `plan`, `drain --what-if`, `capacity --after`); or what "
        "the command checks does not hold: an inventory change refused (its pre-check, "
        "`explain`), nothing fits (`capacity`, `explain candidates`), a host not drained "
        "(`drain`; `--what-if`: one that would not be), a step refused (`plan`, `capacity "
        "--after`) or a commit refused (`plan --apply`), faults found (`db check`), a "
        "server in ERROR (`lab boot`); `heal`: `--max-count` reached with servers left",
    ),
    (
        NO_PROVIDER,
        "`heal`: a server's host has no resource provider (its compute service was "
        "deleted: re-create or restart it)",
    ),
    (
        FOUND,
        "`audit`: something found, not fixed (or `--delete --apply` could not write all "
        "of it); `heal`: a write failed",
    ),
    (ALL_FIXED, "`audit --delete --apply`: everything found was fixed; `heal`: nothing to heal"),
    (
        BAD_INPUT,
        "bad input, for every command: an unknown command or option, a value missing or "
        "malformed (a shape, a duration, a uuid, a microversion, a setting), options that "
        "exclude each other, a provider name that matches none; `audit --provider` and "
        "`heal --instance` naming a provider or server that does not exist; `why` naming a "
        "request id no failed search has; a plan file that does not read, or a change the "
        "sandbox API does not take (`plan`)",
    ),
    (UNEXPECTED, "an unexpected error (a bug: its traceback is printed)"),
)


def leave(status: int) -> None:
    """End the command with `status` (nothing to do for 0)."""
    if status != DONE:
        raise click.exceptions.Exit(status)


def audit_status(found: bool, all_fixed: bool, write_failed: bool) -> int:
    """nova-manage placement audit's: 0 nothing found, 3 found, 4 all fixed."""
    if not found:
        return DONE
    return ALL_FIXED if all_fixed and not write_failed else FOUND


def heal_status(write_failed: bool, stranded: bool, more: bool, healed: bool) -> int:
    """nova-manage placement heal_allocations': the first that holds of 3 a write
    failed, 2 a host without provider, 1 --max-count reached, 4 nothing to heal."""
    if write_failed:
        return WRITE_FAILED
    if stranded:
        return NO_PROVIDER
    if more:
        return MORE_LEFT
    return DONE if healed else NOTHING_TO_HEAL


@contextlib.contextmanager
def deciding() -> Iterator[None]:
    """The status of whatever escapes a command: a usage error 127, a client's error
    its one line and 1 (127 for input naming nothing), anything else 255."""
    try:
        yield
    except click.UsageError as exc:  # click's own, and BadParameter
        exc.exit_code = BAD_INPUT
        raise
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except UnusableDatabase as exc:
        click.echo(f"Error: {exc}", err=True)
        raise click.exceptions.Exit(FAILED) from exc
    except ClientError as exc:  # its words may quote the server's, and so a name
        click.echo(f"Error: {visible(str(exc))}", err=True)
        raise click.exceptions.Exit(BAD_INPUT if isinstance(exc, BadInput) else FAILED) from exc
    except Exception as exc:
        click.echo(traceback.format_exc(), err=True, nl=False)
        click.echo(f"Error: unexpected {type(exc).__name__}: {exc}", err=True)
        raise click.exceptions.Exit(UNEXPECTED) from exc
