"""The edge of the composed server: what every request goes through before any app
sees it, and which settings may not be served at all.

Identity headers (`x-identity-status`, `x-roles`, `x-user-id`, ...) are how a trusted
middleware tells the services who the caller is. A client never gets to say them:
with `auth_strategy = keystone` keystonemiddleware's auth_token removes and rewrites
them; in every other mode `StripClientIdentity` drops them on entry, before the lab's
token filter (which sets them again from a valid token) or Placement's noauth reads
anything. Under `noauth` the few headers of upstream's noauth2 protocol survive
(`x-roles`, `x-project-id`, `x-domain-id`, `openstack-system-scope`): there every
caller may be an admin by design, which is why noauth only binds to loopback.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from typing import Any

# The WSGI names of what keystonemiddleware's auth_token sets or removes.
CLIENT_IDENTITY = re.compile(
    r"^HTTP_(X_IDENTITY_STATUS|X_SERVICE_(?!TOKEN$).+|X_USER(_.+)?|X_PROJECT_.+|X_TENANT(_.+)?"
    r"|X_ROLES?|X_DOMAIN_.+|X_IS_ADMIN_PROJECT|X_SYSTEM_SCOPE|X_TRUST.*|X_APP_CRED.*"
    r"|X_AUTHORIZATION|OPENSTACK_SYSTEM_SCOPE)$"
)
NOAUTH_PROTOCOL = frozenset(
    {"HTTP_X_ROLES", "HTTP_X_PROJECT_ID", "HTTP_X_DOMAIN_ID", "HTTP_OPENSTACK_SYSTEM_SCOPE"}
)


class StripClientIdentity:
    """Drops every identity header the client sent, but those named in `keep`."""

    def __init__(self, app: Callable, keep: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.keep = keep

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        for name in [n for n in environ if CLIENT_IDENTITY.match(n) and n not in self.keep]:
            del environ[name]
        return self.app(environ, start_response)


class UnsafeSettings(ValueError):
    """Settings that would let a caller choose its own identity."""


def weak_lab_users(users: dict[str, Any]) -> list[str]:
    """Names of lab users whose password is the shipped default or their own name."""
    return [u.name for u in users.values() if u.password in ("", "admin", u.name)]


def is_loopback(host: str) -> bool:
    """Whether `host` (a listen address) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
