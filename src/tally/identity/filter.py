"""The WSGI filter that makes Placement and the lab compute accept lab tokens, as
keystonemiddleware's auth_token does for Keystone tokens.

- strict (`auth_strategy = lab`): the identity headers a client sent were dropped at
  the edge (tally.serve.edge); a valid token becomes `x-identity-status: Confirmed` with
  user, project and roles (the headers the services' keystone identity middleware
  reads); anything else `Invalid`.
- lenient (`auth_strategy = noauth` with the lab on): a valid lab token is rewritten
  into the noauth form (token = user id, `x-project-id`, `x-roles`); any other token
  passes untouched, so noauth's `admin` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tally.identity.tokens import Tokens


class TokenFilter:
    def __init__(self, app: Callable, tokens: Tokens, strict: bool) -> None:
        self.app = app
        self.tokens = tokens
        self.strict = strict

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        token = environ.get("HTTP_X_AUTH_TOKEN", "")
        info = self.tokens.validate(token) if "." in token else None
        if self.strict:
            environ["HTTP_X_IDENTITY_STATUS"] = "Confirmed" if info else "Invalid"
            if info:
                environ["HTTP_X_USER_ID"] = info.user.id
                environ["HTTP_X_USER_NAME"] = info.user.name
        elif info:
            environ["HTTP_X_AUTH_TOKEN"] = info.user.id
        if info:
            environ["HTTP_X_PROJECT_ID"] = info.project
            environ["HTTP_X_PROJECT_NAME"] = info.project
            environ["HTTP_X_ROLES"] = ",".join(info.roles)
        return self.app(environ, start_response)
