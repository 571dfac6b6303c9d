"""Who may do what: upstream Placement's rule names, legacy and new (secure RBAC)
defaults, an operator's policy file, and the order of checks around them.

noauth identities used here (as upstream's functional tests send them):
    x-auth-token: user   x-roles: ...   x-project-id: ...   [openstack-system-scope: all]
"""

from __future__ import annotations

import os
import uuid

import falcon.testing
import pytest

from tally.config import Settings, load_settings
from tally.placement import openapi, policy
from tally.placement.app import ROUTES, create_app
from tally.placement.context import Identity
from tally.placement.error_types import Forbidden

PROJECT = "7d2c4f1e9a8b4c3d8e7f6a5b4c3d2e1f"
OTHER_PROJECT = "0a1b2c3d4e5f40718293a4b5c6d7e8f9"


def who(roles: str, project: str = PROJECT, **extra: str) -> dict[str, str]:
    return {"x-auth-token": "user", "x-roles": roles, "x-project-id": project, **extra}


ADMIN = who("admin,member,reader")
SERVICE = who("service")
MEMBER = who("member,reader")
READER = who("reader")
SYSTEM_ADMIN = {"x-auth-token": "user", "x-roles": "admin", "openstack-system-scope": "all"}


def denied(result: falcon.testing.Result, rule: str) -> None:
    assert result.status_code == 403, result.text
    error = result.json["errors"][0]
    assert error["title"] == "Forbidden"
    assert error["detail"] == f"Policy does not allow {rule} to be performed."
    assert error["request_id"].startswith("req-")


def new_provider(client) -> str:
    rp = str(uuid.uuid4())
    created = client.simulate_post("/resource_providers", json={"name": rp, "uuid": rp})
    assert created.status_code == 200, created.text
    return rp


# -- legacy defaults (enforce_new_defaults = false: Tally's default) ------------------


def test_legacy_admin_and_service_may_use_the_api(client):
    rp = new_provider(client)
    for headers in (ADMIN, SERVICE, {"x-auth-token": "admin"}):
        shown = client.simulate_get(f"/resource_providers/{rp}", headers=headers)
        assert shown.status_code == 200


def test_legacy_member_and_reader_are_refused(client):
    rp = new_provider(client)
    for headers in (MEMBER, READER, {"x-auth-token": "someone"}):
        denied(
            client.simulate_get("/resource_providers", headers=headers),
            "placement:resource_providers:list",
        )
        denied(
            client.simulate_put(
                f"/resource_providers/{rp}/traits",
                headers=headers,
                json={"traits": [], "resource_provider_generation": 0},
            ),
            "placement:resource_providers:traits:update",
        )


def test_legacy_reshaper_still_admits_admin(client):
    """The legacy admin-only default is ORed into service_api."""
    result = client.simulate_post("/reshaper", headers=ADMIN, json={})
    assert result.status_code == 400  # past the policy: the empty body is refused
    denied(client.simulate_post("/reshaper", headers=MEMBER, json={}), "placement:reshaper:reshape")


def test_project_reader_reads_only_its_own_project_usages(client):
    own = client.simulate_get("/usages", params={"project_id": PROJECT}, headers=READER)
    assert own.status_code == 200
    assert own.json == {"usages": {}}
    denied(
        client.simulate_get("/usages", params={"project_id": OTHER_PROJECT}, headers=READER),
        "placement:usages",
    )
    # the last of repeated values is the one checked (and the one used)
    mixed = client.simulate_get(
        f"/usages?project_id={OTHER_PROJECT}&project_id={PROJECT}", headers=READER
    )
    assert mixed.status_code == 200
    denied(client.simulate_get("/usages", headers=READER), "placement:usages")


def test_system_scoped_token_is_refused_by_project_scoped_rules(client):
    """Every Placement rule is project-scoped, so even a system admin is refused."""
    denied(
        client.simulate_get("/resource_providers", headers=SYSTEM_ADMIN),
        "placement:resource_providers:list",
    )
    denied(
        client.simulate_get("/usages", params={"project_id": PROJECT}, headers=SYSTEM_ADMIN),
        "placement:usages",
    )


def test_noauth_project_comes_from_token_unless_x_project_id(client):
    """token `user:project` names the project; `x-project-id` wins, as upstream."""
    by_token = {"x-auth-token": f"user:{PROJECT}", "x-roles": "reader"}
    ok = client.simulate_get("/usages", params={"project_id": PROJECT}, headers=by_token)
    assert ok.status_code == 200
    overridden = {**by_token, "x-project-id": OTHER_PROJECT}
    refused = client.simulate_get("/usages", params={"project_id": PROJECT}, headers=overridden)
    assert refused.status_code == 403


# -- new defaults -------------------------------------------------------------------


@pytest.fixture
def secure(make_client):
    return make_client(enforce_new_defaults=True)


def test_new_defaults_reshaper_is_for_the_service_role_only(secure):
    denied(secure.simulate_post("/reshaper", headers=ADMIN, json={}), "placement:reshaper:reshape")
    assert secure.simulate_post("/reshaper", headers=SERVICE, json={}).status_code == 400


def test_new_defaults_admin_service_and_project_reader(secure):
    rp = new_provider(secure)
    for headers in (ADMIN, SERVICE):
        assert secure.simulate_get(f"/resource_providers/{rp}", headers=headers).status_code == 200
    denied(
        secure.simulate_get(f"/resource_providers/{rp}", headers=MEMBER),
        "placement:resource_providers:show",
    )
    own = secure.simulate_get("/usages", params={"project_id": PROJECT}, headers=READER)
    assert own.status_code == 200
    denied(
        secure.simulate_get("/usages", params={"project_id": OTHER_PROJECT}, headers=MEMBER),
        "placement:usages",
    )


# -- an operator's policy file -------------------------------------------------------


def test_policy_file_overrides_rules_by_name(make_client, tmp_path):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        '"placement:resource_providers:list": "role:auditor"\n'
        '"admin_or_service_api": "role:admin or role:service or role:operator"\n'
    )
    client = make_client(policy_file=str(policy_file))
    auditor = who("auditor")
    assert client.simulate_get("/resource_providers", headers=auditor).status_code == 200
    denied(
        client.simulate_get("/resource_providers", headers=ADMIN),
        "placement:resource_providers:list",
    )
    denied(client.simulate_get("/traits", headers=auditor), "placement:traits:list")
    # overriding a base rule changes every API rule built on it
    assert client.simulate_get("/traits", headers=who("operator")).status_code == 200


def test_policy_file_is_reread_when_it_changes(make_client, tmp_path):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"placement:traits:list": "role:admin"\n')
    client = make_client(policy_file=str(policy_file))
    denied(client.simulate_get("/traits", headers=READER), "placement:traits:list")
    policy_file.write_text('"placement:traits:list": "@"\n')
    later = os.stat(policy_file).st_mtime + 10
    os.utime(policy_file, (later, later))
    assert client.simulate_get("/traits", headers=READER).status_code == 200


def test_placement_conf_policy_options(sqlite_engine, tmp_path):
    """[oslo_policy] enforce_new_defaults and a policy_file relative to placement.conf."""
    (tmp_path / "rules.yaml").write_text('"placement:traits:list": "role:auditor"\n')
    conf = tmp_path / "placement.conf"
    conf.write_text("[oslo_policy]\nenforce_new_defaults = true\npolicy_file = rules.yaml\n")
    settings = load_settings(placement_conf=str(conf), environ={})
    assert settings.enforce_new_defaults is True
    assert settings.policy_file == str(tmp_path / "rules.yaml")
    client = falcon.testing.TestClient(
        create_app(settings, sqlite_engine), headers={"openstack-api-version": "placement latest"}
    )
    assert client.simulate_get("/traits", headers=who("auditor")).status_code == 200
    denied(client.simulate_post("/reshaper", headers=ADMIN, json={}), "placement:reshaper:reshape")


def test_policy_yaml_beside_placement_conf_is_found(tmp_path):
    (tmp_path / "policy.yaml").write_text("{}\n")
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = noauth2\n")
    assert load_settings(placement_conf=str(conf), environ={}).policy_file == str(
        tmp_path / "policy.yaml"
    )


def test_missing_policy_file_fails_at_start(sqlite_engine, tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        create_app(Settings.of(policy_file=str(tmp_path / "nope.yaml")), sqlite_engine)


def test_no_policy_file_means_no_search_of_home_or_etc(monkeypatch, tmp_path):
    """oslo.policy would look for ./policy.yaml in ~/ and /etc/; Tally does not."""
    (tmp_path / "policy.yaml").write_text('"placement:traits:list": "@"\n')
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    enforcer = policy.Policy(Settings.of())
    reader = Identity("u", PROJECT, ("reader",))
    with pytest.raises(Forbidden, match="placement:traits:list"):
        enforcer.authorize(reader, "placement:traits:list")


# -- rule names as data --------------------------------------------------------------


def test_every_route_method_names_a_registered_rule():
    registered = set(policy.rule_names())
    used = set()
    for path, resource in ROUTES:
        if path in openapi.OPEN_PATHS:  # the version document and the API document
            assert not hasattr(resource, "POLICIES")
            continue
        methods = {
            name[3:].upper()
            for name in dir(resource)
            if name.startswith("on_") and name.count("_") == 1
        }
        assert set(resource.POLICIES) == methods, path
        used |= set(resource.POLICIES.values())
    assert used <= registered
    assert used == {name for name, *_ in policy.API_RULES}


# -- the order of checks, as upstream -------------------------------------------------


def test_missing_token_is_401_before_policy(client):
    result = client.simulate_get("/resource_providers", headers={"x-auth-token": ""})
    assert result.status_code == 401


def test_wrong_method_and_version_gate_answer_before_policy(client):
    assert client.simulate_delete("/resource_providers", headers=READER).status_code == 405
    old = client.simulate_get(
        "/usages",
        params={"project_id": OTHER_PROJECT},
        headers={**READER, "openstack-api-version": "placement 1.8"},
    )
    assert old.status_code == 404


def test_unacceptable_accept_is_406_before_policy(client):
    result = client.simulate_get("/resource_providers", headers={**READER, "accept": "text/plain"})
    assert result.status_code == 406


# -- request limits ------------------------------------------------------------------


def test_oversized_query_string_is_414(make_client):
    client = make_client(max_query_bytes=100)
    fits = client.simulate_get("/resource_providers", query_string="name=" + "a" * 95)
    assert fits.status_code == 200
    result = client.simulate_get("/resource_providers", query_string="name=" + "a" * 96)
    assert result.status_code == 414
    error = result.json["errors"][0]
    assert error["title"] == "Request-URI Too Long"
    assert "100 bytes" in error["detail"]
    # checked before auth: no work for an unauthenticated giant query
    anonymous = client.simulate_get(
        "/resource_providers", query_string="x=" + "a" * 200, headers={"x-auth-token": ""}
    )
    assert anonymous.status_code == 414


def test_oversized_body_is_413(make_client):
    client = make_client(max_body_bytes=50)
    result = client.simulate_post("/resource_providers", json={"name": "x" * 60})
    assert result.status_code == 413
    error = result.json["errors"][0]
    assert error["title"] == "Request Entity Too Large"
    assert error["code"] == "placement.undefined_code"
    assert "50 bytes" in error["detail"]
