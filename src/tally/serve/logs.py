"""Logging as every way of serving Tally sets it up (`tally serve`, `tally.serve.wsgi`): one
format on stderr, and the identity libraries' debug output held at INFO."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from tally.escapes import visible

# Libraries whose debug output shows identity-service traffic (token hashes, request
# dumps): never below INFO, whatever `log_level` says.
QUIET_LOGGERS = ("keystonemiddleware", "keystoneauth", "keystoneclient", "oslo_policy")
# Libraries that say at INFO what only their own developers need: alembic's plugin
# set-up (seven lines per process each time the schema is looked at), held at WARNING.
CHATTY_LOGGERS = ("alembic.runtime.plugins",)
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def one_line(text: str) -> str:
    """`text` with every control character escaped (tally.escapes): a message quoting
    a client's bytes (a request line, a name, a header) cannot start a line of its own
    in the log, so nobody can append a forged one."""
    return visible(text)


class OneLineFormatter(logging.Formatter):
    """Each record's message on one line, control characters escaped; a traceback
    (our own text, not a client's) still follows on lines of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = one_line(record.message)
        return super().formatMessage(record)


def configure_logging(settings: Any) -> None:
    """The level, and the file (`log_file` in `log_dir`, as oslo.log places it) or
    stderr; then, once, the placement.conf options Tally does not use."""
    level = getattr(logging, settings.log_level.upper(), logging.INFO)
    path = log_path(settings.log_file, settings.log_dir)
    if not logging.getLogger().handlers:  # (as basicConfig: the first setup stays)
        if path:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            handler: logging.Handler = logging.FileHandler(path)
        else:
            handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(OneLineFormatter(FORMAT))
        logging.basicConfig(level=level, handlers=[handler])
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.getEffectiveLevel(), logging.INFO))
    for name in CHATTY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    if settings.placement_conf:
        from tally.config import unused_placement_options

        unused = unused_placement_options(settings.placement_conf)
        if unused:
            logging.getLogger("tally").warning(
                "%s: options Tally does not use, ignored: %s",
                settings.placement_conf,
                ", ".join(unused),
            )


def log_path(log_file: str, log_dir: str) -> str | None:
    """Where the log goes: None for stderr."""
    if log_dir:
        return os.path.join(log_dir, log_file or "tally.log")
    return log_file or None
