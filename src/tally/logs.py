"""Logging as every way of serving Tally sets it up (`tally serve`, `tally.wsgi`): one
format on stderr, and the identity libraries' debug output held at INFO."""

from __future__ import annotations

import logging
import sys

# Libraries whose debug output shows identity-service traffic (token hashes, request
# dumps): never below INFO, whatever `log_level` says.
QUIET_LOGGERS = ("keystonemiddleware", "keystoneauth", "keystoneclient", "oslo_policy")
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO), format=FORMAT, stream=sys.stderr
    )
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.getEffectiveLevel(), logging.INFO))
