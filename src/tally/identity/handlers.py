"""Version discovery and /v3/auth/tokens, in Keystone's shapes."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

import falcon

from tally.identity.tokens import AuthFailed, TokenInfo, Tokens
from tally.identity.users import DOMAIN

Catalog = Sequence[tuple[str, str, str]]  # (service type, name, path or absolute URL)
REGION = "RegionOne"
VERSION_ID = "v3.14"
MEDIA = "application/vnd.openstack.identity-v3+json"
CATALOG_NS = uuid.UUID("3c3f4b62-6a0f-4d55-9f6e-3a1b2a7d0c11")


class IdentityError(Exception):
    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def render_error(req: falcon.Request, resp: falcon.Response, exc: IdentityError, params) -> None:
    resp.status = exc.status
    resp.media = {"error": {"code": exc.status, "title": exc.title, "message": exc.message}}
    if exc.status == 401:
        resp.set_header("www-authenticate", f'Keystone uri="{_base(req)}/identity"')


def render_falcon_error(
    req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError, params
) -> None:
    title = exc.title.split(" ", 1)[-1] if exc.title[:3].isdigit() else exc.title
    render_error(req, resp, IdentityError(exc.status_code, title, exc.description or title), params)


def _base(req: falcon.Request) -> str:
    return f"{req.forwarded_scheme}://{req.forwarded_host}"


def _time(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def version_document(req: falcon.Request) -> dict[str, Any]:
    return {
        "id": VERSION_ID,
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": f"{_base(req)}{req.root_path}/v3/"}],
        "media-types": [{"base": "application/json", "type": MEDIA}],
    }


class _Resource:
    def __init__(self, tokens: Tokens, catalog: Catalog) -> None:
        self.tokens = tokens
        self.catalog = catalog


class Versions(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_300
        resp.media = {"versions": {"values": [version_document(req)]}}


class Version(_Resource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"version": version_document(req)}


class AuthTokens(_Resource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = req.get_media(default_when_empty=None)
        token, info = self._authenticate(body)
        resp.status = falcon.HTTP_201
        resp.set_header("x-subject-token", token)
        resp.media = {"token": self._token_body(req, info, catalog="nocatalog" not in req.params)}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        info = self._subject(req)
        resp.set_header("x-subject-token", req.get_header("x-subject-token"))
        resp.media = {"token": self._token_body(req, info, catalog="nocatalog" not in req.params)}

    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._subject(req)
        resp.status = falcon.HTTP_200

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Lab tokens are self-contained: nothing to revoke; they expire."""
        self._subject(req)
        resp.status = falcon.HTTP_204

    def _subject(self, req: falcon.Request) -> TokenInfo:
        caller = req.get_header("x-auth-token") or ""
        if not self.tokens.validate(caller):
            raise IdentityError(
                401, "Unauthorized", "The request you have made requires authentication."
            )  # noqa: E501
        info = self.tokens.validate(req.get_header("x-subject-token") or "")
        if info is None:
            raise IdentityError(404, "Not Found", "Could not find token.")
        return info

    def _authenticate(self, body: Any) -> tuple[str, TokenInfo]:
        auth = body.get("auth") if isinstance(body, dict) else None
        identity = auth.get("identity") if isinstance(auth, dict) else None
        if not isinstance(identity, dict) or not isinstance(identity.get("methods"), list):
            raise IdentityError(400, "Bad Request", "auth.identity.methods is required.")
        project = _scoped_project(auth.get("scope"))
        try:
            if "password" in identity["methods"]:
                user = (identity.get("password") or {}).get("user") or {}
                name = user.get("name") or user.get("id")
                if not isinstance(name, str) or not isinstance(user.get("password"), str):
                    raise IdentityError(
                        400, "Bad Request", "password.user needs a name and a password."
                    )  # noqa: E501
                return self.tokens.authenticate(name, user["password"], project)
            if "token" in identity["methods"]:
                old = self.tokens.validate(str((identity.get("token") or {}).get("id") or ""))
                if old is None:
                    raise AuthFailed("The request you have made requires authentication.")
                return self.tokens.issue(old.user, project, methods=("token",))
        except AuthFailed as exc:
            raise IdentityError(401, "Unauthorized", str(exc)) from None
        raise IdentityError(
            400, "Bad Request", "Only the password and token methods are supported."
        )  # noqa: E501

    def _token_body(self, req: falcon.Request, info: TokenInfo, catalog: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "methods": list(info.methods),
            "user": {
                "id": info.user.id,
                "name": info.user.name,
                "domain": DOMAIN,
                "password_expires_at": None,
            },
            "audit_ids": [info.audit_id],
            "issued_at": _time(info.issued_at),
            "expires_at": _time(info.expires_at),
            "project": {"id": info.project, "name": info.project, "domain": DOMAIN},
            "is_domain": False,
            "roles": [{"id": role, "name": role} for role in info.roles],
        }
        if catalog:
            body["catalog"] = [self._service(req, *entry) for entry in self.catalog]
        return body

    def _service(self, req: falcon.Request, kind: str, name: str, where: str) -> dict[str, Any]:
        url = where if "://" in where else f"{_base(req)}{where}"
        return {
            "id": uuid.uuid5(CATALOG_NS, kind).hex,
            "type": kind,
            "name": name,
            "endpoints": [
                {
                    "id": uuid.uuid5(CATALOG_NS, f"{kind}:{interface}").hex,
                    "interface": interface,
                    "region": REGION,
                    "region_id": REGION,
                    "url": url,
                }
                for interface in ("public", "internal", "admin")
            ],
        }


def _scoped_project(scope: Any) -> str | None:
    if not scope:
        return None
    project = scope.get("project") if isinstance(scope, dict) else None
    if not isinstance(project, dict) or not (project.get("name") or project.get("id")):
        raise IdentityError(401, "Unauthorized", "Only project scopes are supported.")
    return str(project.get("name") or project.get("id"))
