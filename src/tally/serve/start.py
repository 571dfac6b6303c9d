"""What every way of serving Tally checks and says before it serves (`tally serve`
and the WSGI entry, `tally.serve.wsgi`), so the two cannot drift apart:

- `refuse_unsafe`: settings that would let anyone choose their identity (noauth on
  an address others reach, the lab identity with its shipped passwords there, and
  `check_auth`'s: keystone that could check no token, lab auth with the lab off);
- `sqlite.refuse_unwritable`: an embedded SQLite database whose folder this process
  cannot write (it read as "cannot reach database" before);
- `announce`: one start line naming the database (its password hidden), the auth
  strategy, the lab and the candidates index, and under noauth a WARNING.

Under a WSGI server the address is the server's, not the `host` setting: the entry
asks the process itself which sockets it listens on (`listening_addresses`).
"""

from __future__ import annotations

import logging
import os
import socket
import stat

from tally.config import Settings
from tally.db import probe
from tally.serve.edge import UnsafeSettings, is_loopback, weak_lab_users

log = logging.getLogger("tally")


def refuse_unsafe(settings: Settings, hosts: list[str]) -> None:
    """UnsafeSettings, in one line, when serving `settings` on `hosts` (the addresses
    listened on) would let a caller choose its identity."""
    from tally.identity.users import parse_users
    from tally.serve.compose import check_auth

    check_auth(settings)
    public = [host for host in hosts if not is_loopback(host)]
    if not public:
        return
    if settings.auth_strategy == "noauth" and not settings.noauth_allow_remote:
        raise UnsafeSettings(
            f"auth_strategy = noauth on {public[0]}: anyone reaching it would be an admin. "
            "Use auth_strategy = keystone, listen on 127.0.0.1, or set noauth_allow_remote "
            "= true (TALLY_NOAUTH_ALLOW_REMOTE=1) if that is intended."
        )
    weak = weak_lab_users(parse_users(settings.lab_users))
    if settings.auth_strategy == "lab" and weak:
        raise UnsafeSettings(
            f"auth_strategy = lab on {public[0]}: lab user(s) {', '.join(weak)} keep the "
            "default password (or their name), which anyone reaching it could log in with. "
            "Set lab_users (TALLY_LAB_USERS=user:password:project:role+role) with "
            "passwords of your own, or listen on 127.0.0.1."
        )


def start_line(settings: Settings, where: str, lab_off: str | None = None) -> str:
    """The one line saying what is served, `where` (an address, or the WSGI server);
    `lab_off`: why the lab is off, when the settings alone do not say it."""
    from tally.serve.compose import lab_enabled, lab_off_reason

    url = probe.safe_url(probe.with_our_driver(settings.database))
    if lab_enabled(settings):
        lab = "lab on (compute /compute/v2.1"
        lab += ", identity /identity/v3)" if settings.auth_strategy in ("noauth", "lab") else ")"
    else:
        lab = f"lab off ({lab_off or lab_off_reason(settings)})"
    mb = settings.candidates_index_max_mb
    index = f"candidates index up to {mb} MiB per process" if mb > 0 else "candidates index off"
    return (
        f"Tally Placement {where}: database {url}, auth_strategy {settings.auth_strategy}, "
        f"{lab}, {index}"
    )


NOAUTH_WARNING = (
    "auth_strategy = noauth: no token is checked, every request with the token `admin` "
    "is an admin (and any token names its own user); on any network others share, use "
    "auth_strategy = keystone"
)


def announce(settings: Settings, where: str, lab_off: str | None = None) -> None:
    """Log the start line; under noauth, the WARNING that anyone may be an admin."""
    log.info("%s", start_line(settings, where, lab_off))
    if settings.auth_strategy == "noauth":
        log.warning("%s", NOAUTH_WARNING)


def listening_addresses() -> list[tuple[str, int]] | None:
    """(host, port) of each TCP socket this process listens on (a WSGI server's
    worker holds its server's), from /proc/self/fd; None where that cannot be read."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found = []
    for name in names:
        try:
            fd = int(name)
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=fd)
        except (OSError, ValueError):
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.getsockopt(
                socket.SOL_SOCKET, socket.SO_ACCEPTCONN
            ):
                host, port = sock.getsockname()[:2]
                found.append((str(host), int(port)))
        except OSError:
            pass
        finally:
            sock.detach()  # the server's: not ours to close
    return sorted(set(found))
