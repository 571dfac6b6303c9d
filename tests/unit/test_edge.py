"""The edge: no caller chooses its own identity, in any auth mode."""

from __future__ import annotations

import httpx
import pytest

from tally.config import Settings
from tally.serve.compose import create_server, describe
from tally.serve.edge import NOAUTH_PROTOCOL, StripClientIdentity, UnsafeSettings

SPOOFED_ADMIN = {
    "x-identity-status": "Confirmed",
    "x-roles": "admin",
    "x-user-id": "admin",
    "x-project-id": "admin",
    "openstack-system-scope": "all",
}


def seen_by_app(keep: frozenset[str], headers: dict[str, str]) -> dict[str, str]:
    """The HTTP_* environ an app behind the edge receives."""
    seen: dict[str, str] = {}

    def app(environ, start_response):  # noqa: ANN001, ANN202 - WSGI
        seen.update({k: v for k, v in environ.items() if k.startswith("HTTP_")})
        start_response("204 No Content", [])
        return [b""]

    transport = httpx.WSGITransport(app=StripClientIdentity(app, keep))
    with httpx.Client(transport=transport, base_url="http://edge.test") as http:
        http.get("/", headers=headers)
    return seen


def test_every_identity_header_is_dropped():
    sent = {
        **SPOOFED_ADMIN,
        "x-user-name": "admin",
        "x-user-domain-id": "default",
        "x-project-name": "admin",
        "x-project-domain-id": "default",
        "x-domain-id": "default",
        "x-tenant-id": "admin",
        "x-tenant": "admin",
        "x-role": "admin",
        "x-service-roles": "service",
        "x-service-identity-status": "Confirmed",
        "x-is-admin-project": "True",
        "x-system-scope": "all",
        "x-trust-id": "t",
    }
    seen = seen_by_app(frozenset(), sent)
    leaked = {name for name in sent if "HTTP_" + name.upper().replace("-", "_") in seen}
    assert leaked == set()


def test_request_headers_that_are_not_identity_pass():
    sent = {
        "x-auth-token": "tok",
        "x-service-token": "svc",
        "x-openstack-request-id": "req-1",
        "openstack-api-version": "placement 1.39",
    }
    seen = seen_by_app(frozenset(), sent)
    assert seen["HTTP_X_AUTH_TOKEN"] == "tok"
    assert seen["HTTP_X_SERVICE_TOKEN"] == "svc"
    assert seen["HTTP_X_OPENSTACK_REQUEST_ID"] == "req-1"
    assert seen["HTTP_OPENSTACK_API_VERSION"] == "placement 1.39"


def test_noauth_keeps_only_its_own_protocol_headers():
    seen = seen_by_app(NOAUTH_PROTOCOL, SPOOFED_ADMIN)
    assert "HTTP_X_IDENTITY_STATUS" not in seen and "HTTP_X_USER_ID" not in seen
    assert seen["HTTP_X_ROLES"] == "admin" and seen["HTTP_X_PROJECT_ID"] == "admin"


def test_lab_auth_without_the_lab_is_refused(sqlite_engine):
    """Was: Placement trusted `x-identity-status: Confirmed` + `x-roles: admin`."""
    for lab in ("off", "auto"):
        settings = Settings.of(auth_strategy="lab", lab=lab, database_url="postgresql://x/y")
        with pytest.raises(UnsafeSettings, match="auth_strategy = lab needs the lab"):
            create_server(settings, sqlite_engine)


@pytest.mark.parametrize(("auth", "lab"), [("noauth", "off"), ("noauth", "on"), ("lab", "on")])
def test_spoofed_admin_is_refused_in_every_mode(sqlite_engine, auth, lab):
    settings = Settings.of(auth_strategy=auth, lab=lab, lab_step_seconds=0, lab_tracker_seconds=0)
    transport = httpx.WSGITransport(app=create_server(settings, sqlite_engine))
    paths = ["/resource_providers", "/placement/resource_providers"]
    if lab == "on":
        paths.append("/compute/v2.1/os-services")
    with httpx.Client(transport=transport, base_url="http://edge.test") as http:
        for path in paths:
            anonymous = http.get(path, headers=SPOOFED_ADMIN)
            assert anonymous.status_code == 401, (path, anonymous.text)
            if auth == "lab":  # a token the lab never issued, with the admin headers
                bogus = http.get(path, headers={**SPOOFED_ADMIN, "x-auth-token": "a.b"})
                assert bogus.status_code == 401, (path, bogus.text)


def test_start_lines_never_show_a_password():
    settings = Settings.of(lab="on", lab_users="admin:s3cret-pw:admin:admin,bob:bob:demo:member")
    lines = "\n".join(describe(settings, "http://127.0.0.1:8778"))
    assert "s3cret-pw" not in lines
    assert "user admin (its lab_users password)" in lines
    assert "user bob (the default password)" in lines
