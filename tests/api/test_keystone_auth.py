"""`auth_strategy = keystone`: the real keystonemiddleware auth_token, configured by the
`[keystone_authtoken]` section of an operator's placement.conf, validating tokens
against a fake Keystone v3 served over HTTP in a thread:

    GET  /v3                version discovery
    POST /v3/auth/tokens    the placement service user's password login; its token's
                            catalog lists this server as the identity endpoint
    GET  /v3/auth/tokens    validation of X-Subject-Token: 200 with the token's
                            user/project/roles, 404 for a token it never issued

Tokens: "tok-admin" (admin), "tok-service" (service), "tok-reader" (reader),
"tok-expired" (admin, but expired an hour ago); anything else is unknown.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import falcon.testing
import pytest

from tally.config import load_settings
from tally.serve.compose import create_server
from tests.live import JsonRequestHandler

pytest.importorskip("keystonemiddleware")

PASSWORD = "s3cret-service-pw"
PROJECT = "6c1a0cd0a5b84b1c9d5a3f2c8e2d9a11"
NOW = dt.datetime.now(dt.UTC)
TOKENS = {  # token -> (roles, expires)
    "tok-admin": (["admin", "member", "reader"], NOW + dt.timedelta(hours=1)),
    "tok-service": (["service"], NOW + dt.timedelta(hours=1)),
    "tok-reader": (["reader"], NOW + dt.timedelta(hours=1)),
    "tok-expired": (["admin"], NOW - dt.timedelta(hours=1)),
}


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.000000Z")


class FakeKeystone(JsonRequestHandler):
    validated: list[str] = []
    logins: list[dict] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def token_body(self, roles: list[str], expires: dt.datetime, project: str) -> dict:
        domain = {"id": "default", "name": "Default"}
        endpoint = {"id": "e1", "region": "RegionOne", "region_id": "RegionOne"}
        return {
            "token": {
                "methods": ["password"],
                "expires_at": stamp(expires),
                "issued_at": stamp(NOW - dt.timedelta(hours=2)),
                "user": {"id": f"user-{roles[0]}", "name": roles[0], "domain": domain},
                "project": {"id": project, "name": "demo", "domain": domain},
                "roles": [{"id": f"r-{r}", "name": r} for r in roles],
                "catalog": [
                    {
                        "type": "identity",
                        "name": "keystone",
                        "id": "s1",
                        "endpoints": [
                            {**endpoint, "interface": i, "url": f"{self.base}/v3"}
                            for i in ("public", "internal", "admin")
                        ],
                    }
                ],
            }
        }

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        version = {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": f"{self.base}/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }
        if path == "/v3":
            self.reply(200, {"version": version})
        elif path == "/v3/auth/tokens":
            if self.headers.get("x-auth-token") != "service-own-token":
                self.reply(401, {"error": {"code": 401, "title": "Unauthorized", "message": ""}})
                return
            subject = self.headers.get("x-subject-token", "")
            self.validated.append(subject)
            if subject not in TOKENS:
                self.reply(404, {"error": {"code": 404, "title": "Not Found", "message": ""}})
                return
            roles, expires = TOKENS[subject]
            body = self.token_body(roles, expires, PROJECT)
            self.reply(200, body, {"X-Subject-Token": subject})
        else:
            self.reply(300, {"versions": {"values": [version]}})

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        login = json.loads(self.rfile.read(length))
        self.logins.append(login)
        user = login["auth"]["identity"]["password"]["user"]
        if user["name"] != "placement" or user["password"] != PASSWORD:
            self.reply(401, {"error": {"code": 401, "title": "Unauthorized", "message": ""}})
            return
        body = self.token_body(["service"], NOW + dt.timedelta(hours=1), "service-project")
        self.reply(201, body, {"X-Subject-Token": "service-own-token"})


@contextlib.contextmanager
def _serving(handler: type) -> Iterator[str]:
    """A fake Keystone answering with `handler` in a thread: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def keystone() -> Iterator[str]:
    FakeKeystone.validated, FakeKeystone.logins = [], []
    with _serving(FakeKeystone) as url:
        yield url


def authtoken_section(keystone: str) -> str:
    """An operator's `[keystone_authtoken]` for the Keystone at `keystone`."""
    return (
        "[keystone_authtoken]\n"
        f"www_authenticate_uri = {keystone}/v3\n"
        f"auth_url = {keystone}/v3\n"
        "auth_type = password\n"
        "username = placement\n"
        f"password = {PASSWORD}\n"
        "project_name = service\n"
        "user_domain_name = Default\n"
        "project_domain_name = Default\n"
        "region_name = RegionOne\n"
        "http_request_max_retries = 0\n"
    )


@pytest.fixture
def placement(keystone, sqlite_engine, tmp_path) -> falcon.testing.TestClient:
    """Tally as served (create_server) with an operator's placement.conf."""
    return served(sqlite_engine, tmp_path, keystone)


def served(sqlite_engine, tmp_path, keystone: str) -> falcon.testing.TestClient:  # noqa: ANN001
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = keystone\n" + authtoken_section(keystone))
    settings = load_settings(placement_conf=str(conf), environ={})
    assert settings.auth_strategy == "keystone"
    served = create_server(settings, sqlite_engine)

    def wsgi(environ, start_response):  # noqa: ANN001, ANN202 - a plain function for falcon
        return served(environ, start_response)

    return falcon.testing.TestClient(
        wsgi,
        headers={"openstack-api-version": "placement latest", "accept": "application/json"},
    )


def create_provider(placement, token: str) -> falcon.testing.Result:
    return placement.simulate_post(
        "/resource_providers",
        headers={"x-auth-token": token},
        json={"name": f"cn-{uuid.uuid4().hex[:6]}"},
    )


def test_version_document_needs_no_token(placement):
    assert placement.simulate_get("/").status_code == 200


def test_valid_admin_token_is_admitted(placement):
    created = create_provider(placement, "tok-admin")
    assert created.status_code == 200, created.text
    listed = placement.simulate_get("/resource_providers", headers={"x-auth-token": "tok-admin"})
    assert [p["uuid"] for p in listed.json["resource_providers"]] == [created.json["uuid"]]
    assert "tok-admin" in FakeKeystone.validated
    # auth_token logged in as the service user of [keystone_authtoken] to validate it
    assert FakeKeystone.logins[0]["auth"]["identity"]["password"]["user"]["name"] == "placement"


def test_service_token_is_admitted(placement):
    assert create_provider(placement, "tok-service").status_code == 200


@pytest.mark.parametrize("token", ["tok-expired", "tok-never-issued", None])
def test_expired_unknown_or_missing_token_is_401(placement, token):
    headers = {"x-auth-token": token} if token else {}
    result = placement.simulate_get("/resource_providers", headers=headers)
    assert result.status_code == 401
    error = result.json["errors"][0]
    assert error["title"] == "Unauthorized"
    assert "requires authentication" in error["detail"]
    # auth_token tells the client where to authenticate
    assert "www-authenticate" in result.headers
    assert "/v3" in result.headers["www-authenticate"]


def test_spoofed_identity_headers_do_not_count(placement):
    """auth_token strips identity headers a client sends itself."""
    result = placement.simulate_get(
        "/resource_providers",
        headers={
            "x-auth-token": "tok-never-issued",
            "x-identity-status": "Confirmed",
            "x-roles": "admin",
            "x-user-id": "mallory",
        },
    )
    assert result.status_code == 401


def test_reader_is_refused_a_write_with_403(placement):
    result = create_provider(placement, "tok-reader")
    assert result.status_code == 403
    error = result.json["errors"][0]
    assert error["detail"] == (
        "Policy does not allow placement:resource_providers:create to be performed."
    )
    assert error["code"] == "placement.undefined_code"
    # and a read needs admin or service too under the legacy defaults
    listed = placement.simulate_get("/resource_providers", headers={"x-auth-token": "tok-reader"})
    assert listed.status_code == 403


def test_reader_reads_its_own_project_usages(placement):
    """GET /usages: admin, service, or a reader of the project asked about."""
    mine = placement.simulate_get(
        "/usages", params={"project_id": PROJECT}, headers={"x-auth-token": "tok-reader"}
    )
    assert mine.status_code == 200, mine.text
    assert mine.json["usages"] == {}
    other = placement.simulate_get(
        "/usages", params={"project_id": "someone-else"}, headers={"x-auth-token": "tok-reader"}
    )
    assert other.status_code == 403


def test_no_token_or_password_in_logs(placement, caplog):
    caplog.set_level(logging.DEBUG)
    create_provider(placement, "tok-admin")
    placement.simulate_get("/resource_providers", headers={"x-auth-token": "tok-reader"})
    placement.simulate_get("/resource_providers", headers={"x-auth-token": "tok-never-issued"})
    logged = caplog.text
    assert '"POST /resource_providers" status: 200' in logged
    for secret in (PASSWORD, "tok-admin", "tok-reader", "tok-never-issued", "service-own-token"):
        assert secret not in logged, secret


class BrokenKeystone(FakeKeystone):
    """A Keystone that logs the service user in, then fails every validation."""

    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/") == "/v3/auth/tokens":
            self.reply(500, {"error": {"code": 500, "title": "Internal Server Error"}})
            return
        super().do_GET()


@pytest.fixture
def broken_keystone() -> Iterator[str]:
    with _serving(BrokenKeystone) as url:
        yield url


@pytest.mark.parametrize("outage", ["down", "failing"])
def test_keystone_unreachable_is_503_with_retry_after(
    outage, broken_keystone, sqlite_engine, tmp_path
):
    """As upstream's auth_token (ServiceError, ConnectFailure -> 503): a token that
    cannot be checked is not a bad token. Nothing listens at the port of `down`."""
    from tests.live import free_port

    keystone = broken_keystone if outage == "failing" else f"http://127.0.0.1:{free_port()}"
    client = served(sqlite_engine, tmp_path, keystone)
    result = client.simulate_get("/resource_providers", headers={"x-auth-token": "tok-admin"})
    assert result.status_code == 503, result.text
    assert int(result.headers["retry-after"]) > 0
    assert result.json == {
        "errors": [
            {
                "status": 503,
                "title": "Service Unavailable",
                "detail": "The identity service (Keystone) could not be reached to validate "
                "the token; retry in 5 seconds.",
                "code": "placement.undefined_code",
                "request_id": result.headers["openstack-request-id"],
            }
        ]
    }
    page = client.simulate_get("/tally/ui/", headers={"x-auth-token": "tok-admin"})
    assert page.status_code == 503, page.text  # the page says so too
    # no token at all is still 401, and the version document stays open
    assert client.simulate_get("/resource_providers").status_code == 401
    assert client.simulate_get("/", headers={"x-auth-token": "tok-admin"}).status_code == 200


@pytest.mark.parametrize(
    ("token", "status"),
    [(None, 401), ("tok-never-issued", 401), ("tok-expired", 401), ("tok-reader", 403)],
)
def test_metrics_is_401_without_a_valid_token_and_403_for_a_non_admin(placement, token, status):
    """Issue 40, item 11: without a token /metrics answered 403 (who you are is not
    known: 401, and auth_token says where to authenticate), as Placement answers."""
    headers = {"x-auth-token": token} if token else {}
    result = placement.simulate_get("/metrics", headers=headers)
    assert result.status_code == status, result.text
    if status == 401:
        assert "/v3" in result.headers["www-authenticate"]
    admin = placement.simulate_get("/metrics", headers={"x-auth-token": "tok-admin"})
    assert admin.status_code == 200 and "tally_" in admin.text
