"""CORS: off by default (OPTIONS is a 405), and when origins are configured, preflights
answered before auth and `access-control-*` headers on answers to allowed origins."""

from __future__ import annotations

import wsgiref.validate

import pytest

from tally.config import load_settings

ORIGIN = "http://valid.example.com"


@pytest.fixture(autouse=True)
def lenient_preflight_lint(monkeypatch: pytest.MonkeyPatch) -> None:
    """As upstream, a preflight answer is an empty 200 without content-type, which
    wsgiref's lint (run by falcon's test client) would refuse."""
    strict = wsgiref.validate.check_content_type

    def check(status: str, headers: list[tuple[str, str]]) -> None:
        empty = ("content-length", "0") in [(k.lower(), v) for k, v in headers]
        if not (status.startswith("200") and empty):
            strict(status, headers)

    monkeypatch.setattr(wsgiref.validate, "check_content_type", check)


@pytest.fixture
def cors(make_client):
    return make_client(cors_allowed_origin=ORIGIN, cors_allow_headers="openstack-api-version")


def preflight(client, path="/", origin=ORIGIN, method="GET", headers=None):
    request = {"origin": origin, "access-control-request-method": method, "x-auth-token": ""}
    if headers is not None:
        request["access-control-request-headers"] = headers
    return client.simulate_options(path, headers=request)


def test_without_cors_options_is_405_and_no_headers(client):
    result = preflight(client)
    assert result.status_code == 405
    got = client.simulate_get("/", headers={"origin": ORIGIN})
    assert got.status_code == 200
    assert "access-control-allow-origin" not in got.headers


def test_preflight_from_an_allowed_origin(cors):
    result = preflight(cors, headers="OpenStack-API-Version, content-type")
    assert result.status_code == 200
    assert result.content == b""
    assert "content-type" not in result.headers
    assert result.headers["access-control-allow-origin"] == ORIGIN
    assert result.headers["access-control-allow-methods"] == "GET"
    assert result.headers["access-control-allow-headers"] == "OpenStack-API-Version,content-type"
    assert result.headers["access-control-allow-credentials"] == "true"
    assert result.headers["access-control-max-age"] == "3600"
    assert result.headers["vary"] == "Origin"


def test_preflight_needs_no_token_on_any_path(cors):
    """A browser's preflight carries no credentials: it never reaches auth or policy."""
    result = preflight(cors, "/resource_providers", method="POST", headers="content-type")
    assert result.status_code == 200
    assert result.headers["access-control-allow-methods"] == "POST"


@pytest.mark.parametrize(
    ("origin", "method", "headers"),
    [
        ("http://invalid.example.com", "GET", None),  # origin not allowed
        (ORIGIN, "GET", "x-secret-header"),  # header not allowed
        (ORIGIN, "BREW", None),  # method not allowed
    ],
)
def test_refused_preflight_is_an_empty_200_without_cors_headers(cors, origin, method, headers):
    result = preflight(cors, origin=origin, method=method, headers=headers)
    assert result.status_code == 200
    assert not [h for h in result.headers if h.startswith("access-control-")]


def test_simple_request_from_allowed_origin_on_success_and_errors(cors):
    ok = cors.simulate_get("/", headers={"origin": ORIGIN})
    assert ok.headers["access-control-allow-origin"] == ORIGIN
    assert "Origin" in ok.headers["vary"]
    assert "openstack-api-version" in ok.headers["vary"]
    for path, headers, status in (
        ("/resource_providers", {"x-auth-token": ""}, 401),
        ("/nowhere", {}, 404),
    ):
        error = cors.simulate_get(path, headers={"origin": ORIGIN, **headers})
        assert error.status_code == status
        assert error.headers["access-control-allow-origin"] == ORIGIN
    other = cors.simulate_get("/", headers={"origin": "http://invalid.example.com"})
    assert "access-control-allow-origin" not in other.headers


def test_wildcard_origin_and_exposed_headers(make_client):
    client = make_client(
        cors_allowed_origin="*",
        cors_expose_headers="openstack-request-id,openstack-api-version",
        cors_allow_credentials=False,
    )
    result = client.simulate_get("/", headers={"origin": "https://anywhere.example"})
    assert result.headers["access-control-allow-origin"] == "*"
    assert result.headers["access-control-expose-headers"] == (
        "openstack-request-id,openstack-api-version"
    )
    assert "access-control-allow-credentials" not in result.headers
    assert preflight(client, origin="https://else.example").headers[
        "access-control-allow-origin"
    ] == ("*")


def test_cors_options_of_placement_conf(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[cors]\nallowed_origin = https://a.example, https://b.example\n"
        "allow_headers = openstack-api-version,x-auth-token\nmax_age = 60\n"
        "allow_methods = GET,PUT\nallow_credentials = false\n"
    )
    settings = load_settings(placement_conf=str(conf), environ={})
    assert settings.cors_allowed_origin == ("https://a.example", "https://b.example")
    assert settings.cors_allow_headers == ("openstack-api-version", "x-auth-token")
    assert settings.cors_allow_methods == ("GET", "PUT")
    assert settings.cors_max_age == 60
    assert settings.cors_allow_credentials is False


def test_defaults_follow_upstream_placement(make_client):
    """Only the origin configured: upstream's allowed/exposed headers and methods."""
    client = make_client(cors_allowed_origin=ORIGIN)
    allowed = preflight(
        client, "/traits", method="PUT", headers="X-Auth-Token,OpenStack-API-Version"
    )
    assert allowed.headers["access-control-allow-headers"] == "X-Auth-Token,OpenStack-API-Version"
    assert "access-control-allow-origin" not in preflight(client, method="HEAD").headers
    simple = client.simulate_get("/", headers={"origin": ORIGIN})
    assert simple.headers["access-control-expose-headers"] == (
        "X-Auth-Token,X-Openstack-Request-Id,X-Subject-Token,X-Service-Token,OpenStack-API-Version"
    )
