"""The lab identity (a Keystone v3 subset) and its tokens at Placement and compute."""

from __future__ import annotations

import pytest

USERS = "admin:secret:admin:admin+member,alice:pw:demo:member"


def password(user: str, secret: str, project: str | None = None) -> dict:
    auth: dict = {
        "identity": {
            "methods": ["password"],
            "password": {"user": {"name": user, "domain": {"name": "Default"}, "password": secret}},
        }
    }
    if project:
        auth["scope"] = {"project": {"name": project, "domain": {"name": "Default"}}}
    return {"auth": auth}


def token(lab, user="admin", secret="secret", project="admin") -> str:
    answer = lab.http.post("/identity/v3/auth/tokens", json=password(user, secret, project))
    assert answer.status_code == 201, answer.text
    return answer.headers["x-subject-token"]


@pytest.fixture
def idlab(make_lab):
    return make_lab(lab_users=USERS)


def test_version_discovery(idlab):
    versions = idlab.http.get("/identity")
    assert versions.status_code == 300
    assert versions.json()["versions"]["values"][0]["id"].startswith("v3")
    version = idlab.http.get("/identity/v3").json()["version"]
    assert version["status"] == "stable"
    assert version["links"][0]["href"] == "http://lab.test/identity/v3/"


def test_password_token_with_roles_and_catalog(idlab):
    answer = idlab.http.post("/identity/v3/auth/tokens", json=password("admin", "secret", "admin"))
    assert answer.status_code == 201 and answer.headers["x-subject-token"]
    body = answer.json()["token"]
    assert body["user"]["name"] == "admin" and body["project"]["name"] == "admin"
    assert {r["name"] for r in body["roles"]} == {"admin", "member"}
    catalog = {s["type"]: s["endpoints"] for s in body["catalog"]}
    assert set(catalog) == {"identity", "placement", "compute", "image"}
    urls = {kind: {e["interface"]: e["url"] for e in eps} for kind, eps in catalog.items()}
    assert urls["placement"]["public"] == "http://lab.test/placement"
    assert urls["compute"]["public"] == "http://lab.test/compute/v2.1"
    assert urls["image"]["public"] == "http://lab.test/image"
    assert body["expires_at"] > body["issued_at"]


def test_wrong_password_or_project_is_401(idlab):
    for user, secret, project in [
        ("admin", "nope", "admin"),
        ("ghost", "x", None),
        ("alice", "pw", "admin"),
    ]:
        answer = idlab.http.post("/identity/v3/auth/tokens", json=password(user, secret, project))
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == 401
    bad = idlab.http.post("/identity/v3/auth/tokens", json={"auth": {}})
    assert bad.status_code == 400


def test_token_validation(idlab):
    admin = token(idlab)
    alice = token(idlab, "alice", "pw", "demo")
    shown = idlab.http.get(
        "/identity/v3/auth/tokens", headers={"x-auth-token": admin, "x-subject-token": alice}
    )
    assert shown.status_code == 200
    assert shown.json()["token"]["project"]["name"] == "demo"
    tampered = alice[:-2] + ("AA" if alice[-2:] != "AA" else "BB")
    missing = idlab.http.get(
        "/identity/v3/auth/tokens", headers={"x-auth-token": admin, "x-subject-token": tampered}
    )
    assert missing.status_code == 404
    anonymous = idlab.http.get("/identity/v3/auth/tokens", headers={"x-subject-token": alice})
    assert anonymous.status_code == 401
    rescoped = idlab.http.post(
        "/identity/v3/auth/tokens",
        json={"auth": {"identity": {"methods": ["token"], "token": {"id": alice}}}},
    )
    assert rescoped.status_code == 201


def test_placement_and_compute_accept_lab_tokens_beside_noauth(idlab):
    admin, alice = token(idlab), token(idlab, "alice", "pw", "demo")
    for path in (
        "/placement/resource_providers",
        "/resource_providers",
        "/compute/v2.1/os-services",
    ):
        assert idlab.http.get(path, headers={"x-auth-token": admin}).status_code == 200
        assert idlab.http.get(path, headers={"x-auth-token": alice}).status_code == 403
        assert idlab.http.get(path, headers={"x-auth-token": "admin"}).status_code == 200  # noauth
    servers = idlab.http.get("/compute/v2.1/servers", headers={"x-auth-token": alice})
    assert servers.status_code == 200


def test_strict_lab_auth_takes_only_lab_tokens(make_lab):
    lab = make_lab(lab_users=USERS, auth_strategy="lab")
    admin = token(lab)
    spoofed = {"x-auth-token": "admin", "x-identity-status": "Confirmed", "x-roles": "admin"}
    for path in ("/placement/resource_providers", "/compute/v2.1/os-services"):
        assert lab.http.get(path, headers={"x-auth-token": admin}).status_code == 200
        assert lab.http.get(path, headers={"x-auth-token": "admin"}).status_code == 401
        assert lab.http.get(path, headers=spoofed).status_code == 401
    assert lab.http.get("/").status_code == 200  # the version document stays open
    # the lab compute still reaches Placement in-process as its service user
    lab.compute = lab.compute_as(admin)
    lab.hosts("cmp-1")
    lab.flavor()
    assert lab.boot()["status"] == "ACTIVE"


def test_lab_off_serves_placement_only(make_lab):
    lab = make_lab(lab="off")
    admin = {"x-auth-token": "admin"}
    assert lab.http.get("/compute/v2.1/", headers=admin).status_code == 404
    assert lab.http.get("/identity/v3", headers=admin).status_code == 404
    ok = lab.http.get("/placement/resource_providers", headers={"x-auth-token": "admin"})
    assert ok.status_code == 200


def test_lab_auto_follows_the_database():
    from tally.config import Settings
    from tally.serve.compose import lab_enabled

    assert lab_enabled(Settings.of())
    assert not lab_enabled(Settings.of(database_url="postgresql+psycopg://x@h/db"))
    assert lab_enabled(Settings.of(database_url="postgresql+psycopg://x@h/db", lab="on"))
    assert not lab_enabled(Settings.of(lab="off"))
