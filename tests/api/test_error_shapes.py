"""Placement's error document, for every status the API answers with an error:

    content-type: application/json
    {"errors": [{"status": 409, "title": "Conflict", "detail": "...",
                 "code": "placement.duplicate_name", "request_id": "req-..."}]}

`code` from microversion 1.23 (the clients here speak the latest), `request_id` the
same as the `openstack-request-id` header. Two answers differ from upstream on
purpose: a 401 is this document too (upstream's noauth2 and keystonemiddleware
answer in their own JSON), and a 500 says nothing of the exception (upstream puts
its message in the detail); the exception goes to the log.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable

import falcon.testing
import pytest

from tally.placement.ledger import resource_classes

FIELDS = {"status", "title", "detail", "code", "request_id"}
UNDEFINED = "placement.undefined_code"


@dataclasses.dataclass(frozen=True)
class Case:
    status: int
    title: str
    code: str
    words: str  # in the detail
    request: Callable[[falcon.testing.TestClient], falcon.testing.Result]
    settings: dict = dataclasses.field(default_factory=dict)


def _duplicate(client: falcon.testing.TestClient) -> falcon.testing.Result:
    assert client.simulate_post("/resource_providers", json={"name": "cn1"}).status_code == 200
    return client.simulate_post("/resource_providers", json={"name": "cn1"})


CASES = {
    "400 malformed JSON": Case(
        400,
        "Bad Request",
        UNDEFINED,
        "Malformed JSON",
        lambda c: c.simulate_post(
            "/resource_providers", body="{nope", content_type="application/json"
        ),
    ),
    "401 noauth without a token": Case(
        401,
        "Unauthorized",
        UNDEFINED,
        "requires authentication",
        lambda c: c.simulate_get("/resource_providers", headers={"x-auth-token": ""}),
    ),
    "401 keystone, identity not confirmed": Case(
        401,
        "Unauthorized",
        UNDEFINED,
        "requires authentication",
        lambda c: c.simulate_get("/resource_providers", headers={"x-auth-token": ""}),
        {"auth_strategy": "keystone"},
    ),
    "403 policy": Case(
        403,
        "Forbidden",
        UNDEFINED,
        "Policy does not allow placement:resource_providers:create",
        lambda c: c.simulate_post(
            "/resource_providers", json={"name": "x"}, headers={"x-auth-token": "user"}
        ),
    ),
    "404 no such provider": Case(
        404,
        "Not Found",
        UNDEFINED,
        "No resource provider with uuid",
        lambda c: c.simulate_get(f"/resource_providers/{uuid.uuid4()}"),
    ),
    "404 no such route": Case(
        404,
        "Not Found",
        UNDEFINED,
        "The resource could not be found.",
        lambda c: c.simulate_get("/nowhere"),
    ),
    "405": Case(
        405,
        "Method Not Allowed",
        UNDEFINED,
        "The method DELETE is not allowed for this resource.",
        lambda c: c.simulate_delete("/resource_providers"),
    ),
    "409 duplicate name": Case(409, "Conflict", "placement.duplicate_name", "cn1", _duplicate),
    "413": Case(
        413,
        "Request Entity Too Large",
        UNDEFINED,
        "larger than 50 bytes",
        lambda c: c.simulate_post("/resource_providers", json={"name": "x" * 60}),
        {"max_body_bytes": 50},
    ),
    "414": Case(
        414,
        "Request-URI Too Long",
        UNDEFINED,
        "longer than 100 bytes",
        lambda c: c.simulate_get("/resource_providers", query_string="name=" + "a" * 100),
        {"max_query_bytes": 100},
    ),
    "415": Case(
        415,
        "Unsupported Media Type",
        UNDEFINED,
        "text/plain is not supported",
        lambda c: c.simulate_post("/resource_providers", body="name=x", content_type="text/plain"),
    ),
}


def document(result: falcon.testing.Result, status: int) -> dict:
    """The one error of Placement's document `result` holds, its envelope checked."""
    assert result.status_code == status, result.text
    assert result.headers["content-type"] == "application/json"
    [error] = result.json["errors"]
    assert error["status"] == status
    assert error["request_id"] == result.headers["openstack-request-id"]
    assert error["request_id"].startswith("req-")
    return error


@pytest.mark.parametrize("name", list(CASES))
def test_every_refusal_is_placements_error_document(make_client, name):
    case = CASES[name]
    error = document(case.request(make_client(**case.settings)), case.status)
    assert set(error) == FIELDS
    assert (error["title"], error["code"]) == (case.title, case.code)
    assert case.words in error["detail"]


def test_406_for_a_microversion_names_the_range_and_no_code(client):
    """No microversion was agreed, so none of 1.23's codes (as upstream)."""
    result = client.simulate_get(
        "/resource_providers", headers={"openstack-api-version": "placement 1.99"}
    )
    error = document(result, 406)
    assert set(error) == FIELDS - {"code"} | {"min_version", "max_version"}
    assert (error["min_version"], error["max_version"]) == ("1.0", "1.39")
    assert error["title"] == "Not Acceptable"
    assert "Unacceptable version header: 1.99" in error["detail"]


def test_406_for_an_accept_without_json_is_plain_text(client):
    """The client refused JSON: the same error as upstream's (webob's) plain text."""
    result = client.simulate_get("/resource_providers", headers={"accept": "text/plain"})
    assert result.status_code == 406
    assert result.headers["content-type"].startswith("text/plain")
    assert result.text.startswith("406 Not Acceptable\n\n")


SECRET = "password=hunter2 at /srv/tally/secret.py"


def test_an_unexpected_exception_is_a_500_that_tells_nothing_of_it(
    make_client, monkeypatch, caplog
):
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError(SECRET)

    monkeypatch.setattr(resource_classes, "list_classes", broken)
    caplog.set_level(logging.ERROR, logger="tally.placement")
    error = document(make_client().simulate_get("/resource_classes"), 500)
    assert set(error) == FIELDS
    assert error["title"] == "Internal Server Error"
    assert error["code"] == UNDEFINED
    assert error["detail"] == "An unexpected error occurred."
    # ... while the log has all of it
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.exc_info[0] is RuntimeError and SECRET in str(record.exc_info[1])
