"""Lab tokens: signed, self-contained (user, project, expiry), so any worker can
check one without a shared store. A token names the user; roles are read from the
settings when it is checked, so a user removed from `lab_users` loses access."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import hmac
import json
import uuid
from collections.abc import Callable

from tally.identity.users import User

LIFETIME = dt.timedelta(hours=12)


class AuthFailed(Exception):
    """Wrong credentials or scope; the message says which, for the 401."""


@dataclasses.dataclass(frozen=True)
class TokenInfo:
    user: User
    project: str
    issued_at: dt.datetime
    expires_at: dt.datetime
    audit_id: str
    methods: tuple[str, ...] = ("password",)

    @property
    def roles(self) -> tuple[str, ...]:
        return self.user.roles


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Tokens:
    """Issues and checks tokens for `users`, signed with the key `key()` returns
    (read once, on first use)."""

    def __init__(
        self,
        users: dict[str, User],
        key: Callable[[], bytes],
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.users = users
        self._key_source = key
        self._key: bytes | None = None
        self.now = now or (lambda: dt.datetime.now(dt.UTC).replace(microsecond=0))

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = self._key_source()
        return self._key

    def authenticate(self, name: str, password: str, project: str | None) -> tuple[str, TokenInfo]:
        """A token for a password login scoped to `project` (the user's own when None)."""
        user = self.users.get(name)
        if user is None or not hmac.compare_digest(user.password, password):
            raise AuthFailed("The request you have made requires authentication.")
        return self.issue(user, project)

    def issue(
        self, user: User, project: str | None, methods=("password",)
    ) -> tuple[str, TokenInfo]:
        if project not in (None, user.project):
            raise AuthFailed(f"User {user.name} has no role on project {project}.")
        issued = self.now()
        info = TokenInfo(
            user, user.project, issued, issued + LIFETIME, _b64(uuid.uuid4().bytes), tuple(methods)
        )
        payload = json.dumps(
            {
                "u": user.name,
                "p": info.project,
                "i": int(issued.timestamp()),
                "e": int(info.expires_at.timestamp()),
                "a": info.audit_id,
                "m": list(methods),
            },
            separators=(",", ":"),
        ).encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}", info

    def validate(self, token: str) -> TokenInfo | None:
        """The token's facts, or None when it is not a valid, unexpired lab token."""
        body, _, signature = token.partition(".")
        if not body or not signature:
            return None
        try:
            payload = _unb64(body)
            good = hmac.compare_digest(_unb64(signature), self._sign(payload))
            facts = json.loads(payload) if good else None
        except (ValueError, TypeError):
            return None
        if not isinstance(facts, dict):
            return None
        user = self.users.get(facts.get("u"))
        expires = dt.datetime.fromtimestamp(facts.get("e", 0), dt.UTC)
        if user is None or facts.get("p") != user.project or expires <= self.now():
            return None
        issued = dt.datetime.fromtimestamp(facts.get("i", 0), dt.UTC)
        return TokenInfo(
            user, user.project, issued, expires, facts.get("a", ""), tuple(facts.get("m", ()))
        )

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self.key, payload, hashlib.sha256).digest()
