"""Every exit status of `tally`, decided here. `TABLE` is the table of
docs/reference.md#exit-status (tests/unit/test_exit_codes.py holds them equal, and
tests/lab/test_exit_codes.py runs each row's example).

`audit` and `heal` answer as nova-manage's `placement audit` and `placement
heal_allocations` do; bad input is 127 for every command, as nova-manage's (click
says 2); a service that cannot be reached, or that refuses, is 1. The root group
(`tally.cli.root.Root`) turns what a command raises into its status through
`deciding`; a command that ends on an outcome calls `leave`.

A dry run (`heal`, `audit --delete`, `drain` and `plan` without --apply: nova-manage's
commands write unless told --dry-run) ends as its --apply would, but never with a
status that says something was written: where the --apply would say 0 healed, 4
everything fixed, 0 drained or 0 committed, the dry run says PENDING.
"""

from __future__ import annotations

import contextlib
import os
import sys
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
PENDING = 5  # a dry run that found writes to make
BAD_INPUT = 127
CLOSED_PIPE = 141  # as a shell reports a program ended by SIGPIPE (128 + 13)
UNEXPECTED = 255

# (status, when, for example: commands run in order on a fresh `tally lab up`, the
# last one ending with the status; tests/lab/test_exit_codes.py runs each row)
TABLE: tuple[tuple[int, str, str], ...] = (
    (
        DONE,
        "done; `audit`: nothing found; `heal`: healed; `drain`: drained, or nothing to do "
        "(a dry run: the host is disabled and empty already); `plan --apply`: committed",
        "`tally audit`",
    ),
    (
        FAILED,
        "a service (Placement, the compute API, the database) cannot be reached, or refused "
        "(its title and message on stderr), or lacks Tally's own API the command needs "
        "(`history`, `failures`, and what if: `plan`, `drain --what-if`, `capacity --after`);"
        " or what the command checks does not hold: an inventory change refused (its "
        "pre-check, `explain`), nothing fits (`capacity`, `explain candidates`), a host not "
        "drained or a drain whose plan fails (`drain`: each reason printed; nothing written;"
        " `--what-if`: one that would not drain), a step refused (`plan`, `capacity --after`)"
        " or a commit refused (`plan --apply`), faults found (`db check`), a server in ERROR "
        "(`lab boot`); `heal`: `--max-count` reached with servers left",
        "`tally capacity --resource VCPU=1000`",
    ),
    (
        NO_PROVIDER,
        "`heal`: a server's host has no resource provider (its compute service was "
        "deleted: re-create or restart it)",
        "`tally lab break service-delete --host lab-compute-1; tally audit --delete --apply; "
        "tally heal`",
    ),
    (
        FOUND,
        "`audit`: something found, not fixed (or `--delete --apply` could not write all "
        "of it); `heal`: a write failed",
        "`tally lab break delete-while-down; tally audit`",
    ),
    (
        ALL_FIXED,
        "`audit --delete --apply`: everything found was fixed; `heal`: nothing to heal",
        "`tally heal`",
    ),
    (
        PENDING,
        "a dry run (`heal`, `audit --delete`, `drain`, `plan` without `--apply`) that found "
        "writes it could make, where the `--apply` would end with 0 healed, 4 everything "
        "fixed, 0 drained or 0 committed: nothing written, add `--apply`",
        "`tally lab break delete-while-down; tally audit --delete`",
    ),
    (
        BAD_INPUT,
        "bad input, for every command, found before anything is written (its spelling before "
        "any request): an unknown command or option, a value missing or malformed (a shape, a"
        " duration, a uuid, a URL without its scheme, an amount such as `VCPU=-4`, a resource"
        " class or trait name, a microversion, a setting), options that exclude each other, a"
        " column `-c` does not know, a provider name that matches none, a resource class the "
        "Placement does not have; `audit --provider`, `heal --instance` and `drain` naming a "
        "provider, server or host that does not exist; `why` naming a request id no failed "
        "search has; a plan file that does not read, or a change the sandbox API does not "
        "take (`plan`)",
        "`tally provider inventory set lab-compute-1 --resource VCPU=-4`",
    ),
    (
        CLOSED_PIPE,
        "the reader of its output went away (a `head -1` after it): the rest is dropped "
        "quietly, as a shell's own tools end (128 + SIGPIPE)",
        "none (a pipeline's status is its last command's)",
    ),
    (UNEXPECTED, "an unexpected error (a bug: its traceback is printed)", "none (a bug)"),
)


def leave(status: int) -> None:
    """End the command with `status` (nothing to do for 0)."""
    if status != DONE:
        raise click.exceptions.Exit(status)


def audit_status(found: bool, all_fixed: bool, write_failed: bool, dry_run: bool = False) -> int:
    """nova-manage placement audit's: 0 nothing found, 3 found, 4 all fixed (a dry
    run that would fix all: 5)."""
    if not found:
        return DONE
    if all_fixed and not write_failed:
        return PENDING if dry_run else ALL_FIXED
    return FOUND


def heal_status(
    write_failed: bool, stranded: bool, more: bool, healed: bool, dry_run: bool = False
) -> int:
    """nova-manage placement heal_allocations': the first that holds of 3 a write
    failed, 2 a host without provider, 1 --max-count reached, 4 nothing to heal;
    else 0 healed (a dry run: 5)."""
    if write_failed:
        return WRITE_FAILED
    if stranded:
        return NO_PROVIDER
    if more:
        return MORE_LEFT
    if not healed:
        return NOTHING_TO_HEAL
    return PENDING if dry_run else DONE


def drain_status(apply: bool, feasible: bool, pending: bool, drained: bool) -> int:
    """1 when the plan fails (nothing written); a dry run 5 when there is something
    to do, else 0; applied, 0 drained, else 1."""
    if not feasible:
        return FAILED
    if not apply:
        return PENDING if pending else DONE
    return DONE if drained else FAILED


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
    except BrokenPipeError as exc:  # no traceback, and nothing more to flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise click.exceptions.Exit(CLOSED_PIPE) from exc
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
