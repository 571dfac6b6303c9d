"""PlacementClient over httpx.MockTransport: microversion negotiation, headers, errors."""

from __future__ import annotations

import httpx
import pytest

from tally.clients.cloud import KeystoneAuth
from tally.clients.errors import (
    ClientError,
    ConfigurationError,
    PlacementError,
    Unreachable,
    VersionUnsupported,
)
from tally.clients.placement import PlacementClient


def server(max_version: str = "1.39", seen: list | None = None):
    """A transport answering GET / with `max_version` and echoing other requests."""

    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if request.url.path.endswith("/") and request.url.path.count("/") <= 2:
            doc = {"versions": [{"id": "v1.0", "min_version": "1.0", "max_version": max_version}]}
            return httpx.Response(200, json=doc)
        return httpx.Response(200, json={"path": request.url.path})

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("server_max", "negotiated"), [("1.39", "1.39"), ("1.30", "1.30"), ("1.45", "1.39")]
)
def test_the_version_is_the_highest_both_sides_speak(server_max, negotiated):
    seen: list[httpx.Request] = []
    client = PlacementClient("http://p", transport=server(server_max, seen))
    client.get("/traits")
    client.get("/traits")
    assert client.version == negotiated
    home, first, second = seen  # the version document is read once
    assert "openstack-api-version" not in home.headers
    assert first.headers["openstack-api-version"] == f"placement {negotiated}"
    assert second.headers["x-auth-token"] == "admin"


def test_an_asked_version_is_used_without_asking_the_server():
    seen: list[httpx.Request] = []
    client = PlacementClient("http://p", version="1.12", transport=server("1.39", seen))
    client.get("/resource_providers")
    assert [r.url.path for r in seen] == ["/resource_providers"]
    assert seen[0].headers["openstack-api-version"] == "placement 1.12"
    assert client.at_least("1.12") and not client.at_least("1.13")
    with pytest.raises(VersionUnsupported, match="needs placement microversion 1.28"):
        client.require("1.28", "unset")


def test_latest_means_negotiate_and_garbage_is_refused():
    assert PlacementClient("http://p", version="latest", transport=server("1.20")).version == "1.20"
    with pytest.raises(ConfigurationError, match="not MAJOR.MINOR"):
        PlacementClient("http://p", version="one")


def test_a_base_path_is_kept_and_params_drop_empty_values():
    seen: list[httpx.Request] = []
    client = PlacementClient("http://p/placement/", version="1.39", transport=server(seen=seen))
    client.get("/resource_providers", {"name": "a", "uuid": None, "required": ["X", "!Y"]})
    (request,) = seen
    assert request.url.path == "/placement/resource_providers"
    assert request.url.params.multi_items() == [
        ("name", "a"),
        ("required", "X"),
        ("required", "!Y"),
    ]


def test_a_token_or_an_auth_replaces_the_noauth_admin():
    seen: list[httpx.Request] = []
    PlacementClient("http://p", token="abc", version="1.0", transport=server(seen=seen)).get("/x")
    assert seen[-1].headers["x-auth-token"] == "abc"


def test_an_error_body_becomes_a_placement_error_with_every_member():
    def refuse(request: httpx.Request) -> httpx.Response:
        body = {
            "errors": [
                {
                    "status": 409,
                    "title": "Conflict",
                    "detail": "Inventory for 'VCPU' ... in use: 20 used, new capacity 16",
                    "code": "placement.inventory.inuse",
                    "request_id": "req-1",
                    "usage": [{"resource_class": "VCPU", "used": 20}],
                }
            ]
        }
        return httpx.Response(409, json=body)

    client = PlacementClient("http://p", version="1.39", transport=httpx.MockTransport(refuse))
    with pytest.raises(PlacementError) as caught:
        client.put("/resource_providers/rp/inventories", {})
    error = caught.value
    assert (error.status, error.code, error.request_id) == (
        409,
        "placement.inventory.inuse",
        "req-1",
    )
    assert error.inventory_in_use
    assert error.usage == [{"resource_class": "VCPU", "used": 20}]
    assert str(error) == (
        "Conflict: Inventory for 'VCPU' ... in use: 20 used, new capacity 16 (HTTP 409 "
        "placement.inventory.inuse, PUT /resource_providers/rp/inventories, request req-1)"
    )


@pytest.mark.parametrize(
    ("detail", "shown"),
    [
        (  # Tally's one line
            "JSON does not validate: -1 is less than the minimum of 0. Failed validating "
            "'minimum' in schema['properties']['inventories']['patternProperties']"
            "['^[A-Z0-9_]+$']['properties']['reserved']. On instance['inventories']['VCPU']"
            "['reserved']",
            "Bad Request: inventories.VCPU.reserved: -1 is less than the minimum of 0",
        ),
        (  # upstream's, the schema dumped
            "JSON does not validate: 'nope' is not a 'uuid'\n\nFailed validating 'format' in "
            "schema['properties']['aggregates']['items']:\n    {'type': 'string', 'format': "
            "'uuid'}\n\nOn instance['aggregates'][0]:\n    'nope'",
            "Bad Request: aggregates[0]: 'nope' is not a 'uuid'",
        ),
        ("No such resource class CUSTOM_X.", "Bad Request: No such resource class CUSTOM_X."),
    ],
)
def test_a_4xx_is_its_title_and_detail_never_schema_words_or_undefined_code(detail, shown):
    """Issue 40, item 6: raw jsonschema text and `placement.undefined_code` reached the
    operator."""

    def refuse(request: httpx.Request) -> httpx.Response:
        error = {"status": 400, "title": "Bad Request", "detail": detail}
        return httpx.Response(400, json={"errors": [{**error, "code": "placement.undefined_code"}]})

    client = PlacementClient("http://p", version="1.39", transport=httpx.MockTransport(refuse))
    with pytest.raises(PlacementError) as caught:
        client.post("/resource_providers", {})
    assert str(caught.value) == f"{shown} (HTTP 400, POST /resource_providers)"
    assert caught.value.detail == detail  # the server's words kept for whoever matches them


def test_a_non_json_error_keeps_its_text():
    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="Bad gateway from the proxy")

    client = PlacementClient("http://p", version="1.39", transport=httpx.MockTransport(broken))
    with pytest.raises(PlacementError, match="Bad gateway from the proxy") as caught:
        client.get("/")
    assert caught.value.usage is None and not caught.value.inventory_in_use


def test_a_dead_endpoint_is_unreachable():
    def dead(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = PlacementClient("http://p", version="1.39", transport=httpx.MockTransport(dead))
    with pytest.raises(Unreachable, match="cannot reach Placement at http://p"):
        client.get("/resource_providers")


class FakeSession:
    """The two keystoneauth session calls KeystoneAuth makes."""

    def __init__(self) -> None:
        self.tokens = iter(["expired", "fresh"])
        self.token = next(self.tokens)

    def get_auth_headers(self) -> dict[str, str]:
        return {"X-Auth-Token": self.token}

    def invalidate(self) -> bool:
        self.token = next(self.tokens)
        return True


def test_keystone_auth_sends_the_session_token_and_renews_it_once_on_401():
    seen: list[str] = []

    def keystone_protected(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["x-auth-token"])
        if request.headers["x-auth-token"] != "fresh":
            return httpx.Response(401, json={"errors": [{"status": 401, "detail": "expired"}]})
        return httpx.Response(200, json={"traits": []})

    client = PlacementClient(
        "http://p",
        auth=KeystoneAuth(FakeSession()),
        version="1.6",
        transport=httpx.MockTransport(keystone_protected),
    )
    assert client.get("/traits") == {"traits": []}
    assert seen == ["expired", "fresh"]


def test_a_page_that_is_not_placement_is_named():
    def web_page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>welcome</html>")

    client = PlacementClient("http://www.example", transport=httpx.MockTransport(web_page))
    with pytest.raises(ClientError, match="answered 200 without JSON: is this a Placement"):
        client.get("/resource_providers")
