"""Reaching one of our own WSGI apps in-process (no socket): as a given caller, and
built once on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")
WSGIApp = Callable[[dict[str, Any], Callable], Iterable[bytes]]


def as_caller(app: WSGIApp, user: str, project: str, roles: str) -> WSGIApp:
    """`app` called as `user` of `project` with `roles` (comma-separated): the noauth
    token form and the confirmed-identity headers auth_token would set both say so.
    Only for apps reached from inside this process (nothing strips these headers),
    through httpx's WSGITransport: its PATH_INFO (the path decoded as UTF-8 text) is
    made PEP 3333's, the path's bytes as Latin-1 text, as a server gives it."""

    def call(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        environ["PATH_INFO"] = environ.get("PATH_INFO", "").encode("utf-8").decode("latin-1")
        environ.update(
            HTTP_X_AUTH_TOKEN=f"{user}:{project}",
            HTTP_X_IDENTITY_STATUS="Confirmed",
            HTTP_X_USER_ID=user,
            HTTP_X_PROJECT_ID=project,
            HTTP_X_ROLES=roles,
        )
        return app(environ, start_response)

    return call


def once(make: Callable[[], T]) -> Callable[[], T]:
    """A getter of `make()`, called the first time only (thread-safe)."""
    lock = threading.Lock()
    made: list[T] = []

    def get() -> T:
        with lock:
            if not made:
                made.append(make())
        return made[0]

    return get
