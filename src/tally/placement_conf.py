"""An operator's upstream placement.conf, parsed only here and only by oslo.config,
the library upstream Placement reads it with: its ini dialect (a repeated key: the
last one wins; `[DEFAULT]` options stay in DEFAULT; no `%` interpolation).

`tally.config` takes the options that map to its settings from `read`, `tally
serve` warns about the ones it ignores, and keystonemiddleware's auth_token gets the
same file as an oslo.config object (`oslo_config`) for its `[keystone_authtoken]`.
Values are read as written: oslo.config's `$name` substitution needs every option
registered, which only upstream Placement does.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

DEFAULT = "DEFAULT"


@dataclasses.dataclass(frozen=True)
class PlacementConf:
    """The options a placement.conf sets: section -> option -> values, in file order."""

    path: str
    sections: Mapping[str, Mapping[str, list[str]]]

    def get(self, section: str, option: str) -> str | None:
        """The option's value (the last one given, as oslo.config takes it), as written:
        no `$name` substitution, which needs the option registered."""
        values = self.sections.get(section, {}).get(option)
        return values[-1] if values else None

    def options(self) -> list[tuple[str, str]]:
        """Every (section, option) the file sets."""
        return [(s, o) for s, options in self.sections.items() for o in options]


class PlacementConfError(ValueError):
    """The file is not an ini file oslo.config can read."""


def read(path: str | os.PathLike) -> PlacementConf:
    """Parse `path` with oslo.config's parser; OSError when it cannot be read,
    PlacementConfError when it is not an ini file."""
    from oslo_config import cfg

    sections: dict[str, dict[str, list[str]]] = {}
    try:
        cfg.ConfigParser(os.fspath(path), sections).parse()
    except cfg.ParseError as exc:
        raise PlacementConfError(str(exc)) from None
    return PlacementConf(os.fspath(path), sections)


def oslo_config(path: str | os.PathLike) -> Any:
    """The file as a `cfg.ConfigOpts` of project placement (no other file or folder
    read), for a library that registers and reads its own options there (auth_token)."""
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf(
        args=[], default_config_files=[os.fspath(path)], default_config_dirs=[], project="placement"
    )
    return conf
