"""What to install for an optional part of Tally, said so that it works from where
the reader is. Tally is installed from its checkout (`pip install '.[mysql]'`) or
from a wheel built there (`python -m build`); no package index has it, so no hint
asks an index for Tally itself. A running Tally names the packages of the
extra it lacks, from its own installed metadata, for the Python that runs it.

`python -m tally.install [--config FILE] [--placement-conf FILE]` prints the extras
the settings (the environment's `TALLY_*` too) need: the database's driver, and
keystonemiddleware with `auth_strategy = keystone`. `bin/serve` installs them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import shlex
import sys
from typing import Any

from tally import DISTRIBUTION

# a database backend -> the extra holding Tally's driver for it
BACKEND_EXTRAS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql"}


def requirements(extra: str) -> list[str]:
    """The requirements of `extra`, from the installed distribution's metadata (none
    when Tally runs from a tree that was never installed)."""
    try:
        listed = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [req.split(";")[0].strip() for req in listed if marker.search(req.split(";", 1)[-1])]


def hint(extra: str) -> str:
    """How to get `extra`: its packages into the Python running Tally, or the
    extra itself from a checkout."""
    checkout = f"from Tally's checkout: `pip install '.[{extra}]'`"
    packages = requirements(extra)
    if not packages:
        return checkout
    command = " ".join([sys.executable, "-m", "pip", "install", *map(shlex.quote, packages)])
    return f"`{command}` (Tally's [{extra}] extra; {checkout})"


def extras_for(settings: Any) -> list[str]:
    """The extras serving `settings` needs, beyond Tally's own dependencies."""
    needed = []
    backend = settings.database.split(":", 1)[0].split("+", 1)[0]  # (no SQLAlchemy here)
    if backend in BACKEND_EXTRAS:
        needed.append(BACKEND_EXTRAS[backend])
    if settings.auth_strategy == "keystone":
        needed.append("keystone")
    return needed


def main(argv: list[str] | None = None) -> None:
    from tally.config import load_settings

    parser = argparse.ArgumentParser(prog="python -m tally.install", add_help=False)
    parser.add_argument("--config")
    parser.add_argument("--placement-conf")
    args, _serve_options = parser.parse_known_args(argv)
    print(" ".join(extras_for(load_settings(args.config, args.placement_conf))))


if __name__ == "__main__":
    main()
