"""Who may read the page, and how a browser says who it is.

The page asks exactly what Placement asks: a token (`x-auth-token`) that the
server's auth mode turns into an identity (noauth: `admin`; lab: a lab token, checked
by the lab identity's token filter; keystone: a Keystone token, checked by
keystonemiddleware's auth_token), then the policy rule `tally:ui:view` (admin only
by default; `policy_file` may change it). The server hosting the page asks both
(its `Gate`, tally.serve.page): the page itself reads no identity headers.

A browser cannot add a header to a link, so the page's login form (`POST
/tally/ui/login`) keeps the token in a cookie, `tally_ui_token`: HttpOnly,
SameSite=Strict, Path=/tally/ui (Secure over https), for the browser session only.
`CookieToken`, at the very edge of the server (in front of auth_token and the lab's
token filter, which then check it as any token), turns that cookie into
`x-auth-token` for GET and HEAD requests under /tally/ui only, and only when no
`x-auth-token` was sent: the Placement API never accepts a cookie. The form refuses
a cross-site POST (`Sec-Fetch-Site`, else `Origin` against `Host`).
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Callable, Iterable
from http.cookies import CookieError, SimpleCookie
from typing import Any

import falcon

from tally.ui.errors import BadRequest, Forbidden

PREFIX = "/tally/ui"  # where tally.serve.compose mounts the page
COOKIE = "tally_ui_token"
RULE = "tally:ui:view"
# What a token may hold: noauth's `user[:project]`, lab tokens, Keystone (Fernet,
# JWS) tokens. Anything else is refused rather than put in a cookie.
TOKEN = re.compile(r"[A-Za-z0-9._~:+/=-]{1,4096}")
MAX_FORM_BYTES = 8192
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9/_.~%?&=+,:-]*")


class CookieToken:
    """WSGI filter at the edge: the page's cookie as `x-auth-token`, for the page only."""

    def __init__(self, app: Callable, prefix: str = PREFIX) -> None:
        self.app = app
        self.prefix = prefix

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if (
            (path == self.prefix or path.startswith(self.prefix + "/"))
            and environ.get("REQUEST_METHOD") in ("GET", "HEAD")
            and not environ.get("HTTP_X_AUTH_TOKEN")
        ):
            token = cookie_token(environ.get("HTTP_COOKIE", ""))
            if token:
                environ["HTTP_X_AUTH_TOKEN"] = token
        return self.app(environ, start_response)


def cookie_token(header: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel and TOKEN.fullmatch(morsel.value) else None


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who reads the page, as the gate found them (shown in its header)."""

    user_id: str
    project_id: str | None

    def __str__(self) -> str:
        return f"{self.user_id} ({self.project_id or 'no project'})"


# Who may read the page: the caller of a request, or Unauthorized / Forbidden
# (tally.ui.errors). The server hosting the page decides (tally.serve.page: the
# identity Placement's auth mode reads, then the policy rule RULE).
Gate = Callable[[falcon.Request], Caller]


def check_same_origin(req: falcon.Request) -> None:
    """Forbidden for a form posted from another site (login CSRF)."""
    site = req.get_header("sec-fetch-site")
    if site is not None:
        if site not in ("same-origin", "none"):
            raise Forbidden("The login form must be posted from this page.")
        return
    origin = req.get_header("origin")
    if origin and urllib.parse.urlsplit(origin).netloc != (req.get_header("host") or ""):
        raise Forbidden("The login form must be posted from this page.")


def read_form(req: falcon.Request) -> dict[str, str]:
    """An application/x-www-form-urlencoded body (the login form), bounded."""
    if (req.content_type or "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise BadRequest("Send the login form (application/x-www-form-urlencoded).")
    if (req.content_length or 0) > MAX_FORM_BYTES:
        raise BadRequest("The login form is too large.")
    body = req.bounded_stream.read(MAX_FORM_BYTES).decode("utf-8", "replace")
    return {k: v[-1] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}


def set_cookie(req: falcon.Request, resp: falcon.Response, token: str | None) -> None:
    """The token cookie (None: expire it), scoped to the page's path."""
    path = req.root_path or PREFIX
    secure = req.scheme == "https"
    if token is None:
        resp.unset_cookie(COOKIE, path=path, same_site="Strict")
        return
    resp.set_cookie(COOKIE, token, path=path, secure=secure, http_only=True, same_site="Strict")


def safe_next(req: falcon.Request, target: str) -> str:
    """Where to go after logging in: a path of the page, never another site."""
    root = req.root_path or PREFIX
    if target.startswith(root) and _PLAIN_PATH.fullmatch(target):
        return target
    return root + "/"
