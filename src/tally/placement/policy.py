"""The authorization seam.

For now the legacy default of upstream Placement: every API but the version
document needs the admin (or service) role. Per-rule defaults, secure RBAC and
policy files plug in here without touching handlers.
"""

from __future__ import annotations

from tally.placement.context import Identity
from tally.placement.ledger.errors import Forbidden

PRIVILEGED_ROLES = frozenset({"admin", "service"})


def authorize(identity: Identity, rule: str) -> None:
    if PRIVILEGED_ROLES.intersection(identity.roles):
        return
    raise Forbidden(f"Policy does not allow {rule} to be performed.")
