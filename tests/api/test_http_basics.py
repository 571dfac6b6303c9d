"""The HTTP envelope every answer shares: version document, microversion echo,
request ids, error body shape, 404/405/406."""

from __future__ import annotations

import pytest


def test_version_document_needs_no_token(client):
    result = client.simulate_get("/", headers={"x-auth-token": ""})
    assert result.status_code == 200
    version = result.json["versions"][0]
    assert (version["min_version"], version["max_version"]) == ("1.0", "1.39")
    assert version["status"] == "CURRENT"


def test_microversion_echo_and_vary_on_success_and_error(client):
    ok = client.simulate_get("/", headers={"openstack-api-version": "placement 1.15"})
    assert ok.headers["openstack-api-version"] == "placement 1.15"
    assert "openstack-api-version" in ok.headers["vary"]
    assert "last-modified" in ok.headers and ok.headers["cache-control"] == "no-cache"
    missing = client.simulate_get("/nowhere")
    assert missing.status_code == 404
    assert missing.headers["openstack-api-version"] == "placement 1.39"
    assert "openstack-api-version" in missing.headers["vary"]


@pytest.mark.parametrize(
    ("header", "status"),
    [("placement 2.0", 406), ("placement 1.99", 406), ("placement bogus", 400)],
)
def test_bad_microversion(client, header, status):
    result = client.simulate_get("/", headers={"openstack-api-version": header})
    assert result.status_code == status
    error = result.json["errors"][0]
    assert error["status"] == status
    if status == 406:
        assert (error["min_version"], error["max_version"]) == ("1.0", "1.39")


def test_error_body_shape_and_code_from_1_23(make_client):
    old = make_client("1.22").simulate_get("/nowhere").json["errors"][0]
    new = make_client("1.23").simulate_get("/nowhere").json["errors"][0]
    assert "code" not in old
    assert new["code"] == "placement.undefined_code"
    assert new["title"] == "Not Found"
    assert new["request_id"].startswith("req-")


def test_request_id_header_on_every_answer(client):
    for path in ("/", "/nowhere"):
        result = client.simulate_get(path)
        assert result.headers["x-openstack-request-id"].startswith("req-")
        assert result.headers["openstack-request-id"] == result.headers["x-openstack-request-id"]


def test_wrong_method_is_405_with_allow(client):
    result = client.simulate_delete("/")
    assert result.status_code == 405
    assert result.headers["allow"] == "GET"
    assert result.json["errors"][0]["title"] == "Method Not Allowed"


def test_missing_token_is_401(client):
    result = client.simulate_get("/resource_providers", headers={"x-auth-token": ""})
    assert result.status_code == 401


def test_keystone_identity_comes_from_auth_token_headers(make_client):
    client = make_client(auth_strategy="keystone")
    unconfirmed = client.simulate_get("/resource_classes", headers={"x-auth-token": ""})
    assert unconfirmed.status_code == 401
    reader = client.simulate_get(
        "/resource_classes",
        headers={"x-identity-status": "Confirmed", "x-roles": "reader", "x-user-id": "u"},
    )
    assert reader.status_code == 403
    assert (
        "max_version" in client.simulate_get("/", headers={"x-auth-token": ""}).json["versions"][0]
    )


def test_a_body_on_get_or_delete_is_refused(client):
    for method in ("GET", "DELETE"):
        result = client.simulate_request(
            method, "/resource_classes/CUSTOM_X", body='{"a": 1}', content_type="application/json"
        )
        assert result.status_code == 400
        assert f"A {method} request does not take a body" in result.json["errors"][0]["detail"]
