"""GET /openapi.json: the API at each microversion, as OpenAPI 3.1, generated from
the route table (`app.ROUTES`) and the one schema table the handlers validate
with (`schemas.table`). The expectations are drawn from those two tables: a
schema is added in its row and nowhere else, and a route without its operations
in the schema table fails here."""

from __future__ import annotations

import re
import uuid

import falcon.inspect
import falcon.testing
import pytest
import schemathesis

from tally.config import Settings
from tally.placement import microversion
from tally.placement.app import ROUTES, create_app
from tally.placement.handlers import common
from tally.placement.schemas.operation import Operation, Rows, at
from tally.placement.schemas.table import OPERATIONS

# Every operation of the route table, with the microversion it appeared in (the
# Placement API reference); the document at 1.x lists exactly those up to 1.x.
FIRST = {
    ("/", "GET"): "1.0",
    ("/resource_providers", "GET"): "1.0",
    ("/resource_providers", "POST"): "1.0",
    ("/resource_providers/{uuid}", "GET"): "1.0",
    ("/resource_providers/{uuid}", "PUT"): "1.0",
    ("/resource_providers/{uuid}", "DELETE"): "1.0",
    ("/resource_classes", "GET"): "1.2",
    ("/resource_classes", "POST"): "1.2",
    ("/resource_classes/{name}", "GET"): "1.2",
    ("/resource_classes/{name}", "PUT"): "1.2",
    ("/resource_classes/{name}", "DELETE"): "1.2",
    ("/resource_providers/{uuid}/inventories", "GET"): "1.0",
    ("/resource_providers/{uuid}/inventories", "PUT"): "1.0",
    ("/resource_providers/{uuid}/inventories", "POST"): "1.0",
    ("/resource_providers/{uuid}/inventories", "DELETE"): "1.5",
    ("/resource_providers/{uuid}/inventories/{resource_class}", "GET"): "1.0",
    ("/resource_providers/{uuid}/inventories/{resource_class}", "PUT"): "1.0",
    ("/resource_providers/{uuid}/inventories/{resource_class}", "DELETE"): "1.0",
    ("/resource_providers/{uuid}/aggregates", "GET"): "1.1",
    ("/resource_providers/{uuid}/aggregates", "PUT"): "1.1",
    ("/traits", "GET"): "1.6",
    ("/traits/{name}", "GET"): "1.6",
    ("/traits/{name}", "PUT"): "1.6",
    ("/traits/{name}", "DELETE"): "1.6",
    ("/resource_providers/{uuid}/traits", "GET"): "1.6",
    ("/resource_providers/{uuid}/traits", "PUT"): "1.6",
    ("/resource_providers/{uuid}/traits", "DELETE"): "1.6",
    ("/allocations", "POST"): "1.13",
    ("/allocations/{consumer_uuid}", "GET"): "1.0",
    ("/allocations/{consumer_uuid}", "PUT"): "1.0",
    ("/allocations/{consumer_uuid}", "DELETE"): "1.0",
    ("/resource_providers/{uuid}/allocations", "GET"): "1.0",
    ("/resource_providers/{uuid}/usages", "GET"): "1.0",
    ("/usages", "GET"): "1.9",
    ("/allocation_candidates", "GET"): "1.10",
    ("/reshaper", "POST"): "1.30",
    ("/openapi.json", "GET"): "1.0",
    ("/tally/v1/history", "GET"): "1.0",  # Tally's own: the same at every version
    ("/tally/v1/failures", "GET"): "1.0",
    ("/tally/v1/amounts", "GET"): "1.0",
    ("/tally/v1/allocation_candidates/why", "GET"): "1.0",
    ("/tally/v1/sandboxes", "GET"): "1.0",  # what if (issue 41)
    ("/tally/v1/sandboxes", "POST"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}", "GET"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}", "DELETE"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}/changes", "POST"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}/diff", "GET"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}/commit", "POST"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}/allocation_candidates", "GET"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}/allocation_candidates/why", "GET"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}/resource_providers/{uuid}/usages", "GET"): "1.0",
    ("/tally/v1/sandboxes/{sandbox}/amounts", "GET"): "1.0",
}


@pytest.fixture
def app(sqlite_engine):
    return create_app(Settings.of(), sqlite_engine)


def document(app, version: str | None = None, **headers: str) -> dict:
    params = {"microversion": version} if version else None
    result = falcon.testing.TestClient(app).simulate_get(
        "/openapi.json", params=params, headers=headers
    )
    assert result.status_code == 200, result.text
    assert result.headers["content-type"] == "application/json"
    return result.json


def operations(doc: dict) -> set[tuple[str, str]]:
    return {(path, method.upper()) for path, item in doc["paths"].items() for method in item}


def test_the_document_lists_exactly_the_route_table_at_each_microversion(app):
    served = {
        (route.path, m.method)
        for route in falcon.inspect.inspect_routes(app)
        for m in route.methods
        if not m.internal
    }
    assert served == set(FIRST)
    for version in microversion.VERSIONS:
        v = microversion.as_tuple(version)
        expected = {op for op, first in FIRST.items() if v >= microversion.as_tuple(first)}
        assert operations(document(app, version)) == expected, version


def test_every_document_is_valid_openapi_3_1(app):
    for version in microversion.VERSIONS:
        doc = document(app, version)
        assert doc["openapi"] == "3.1.0"
        assert doc["info"]["version"] == version
        schemathesis.openapi.from_dict(doc).validate()


def test_the_default_and_latest_are_the_newest_microversion(app):
    newest = document(app, microversion.VERSIONS[-1])
    assert document(app) == newest
    assert document(app, "latest") == newest
    assert newest["info"]["version"] == "1.39"


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("microversion=1.40", "placement.query.bad_value"),
        ("microversion=2.0", "placement.query.bad_value"),
        ("microversion=", "placement.query.bad_value"),
        ("microversion=1.x", "placement.query.bad_value"),
        ("microversion=1.2&microversion=1.3", "placement.query.duplicate_key"),
        ("version=1.2", "placement.undefined_code"),
    ],
)
def test_a_bad_microversion_is_a_placement_400(app, query, code):
    result = falcon.testing.TestClient(app).simulate_get(
        "/openapi.json", query_string=query, headers={"openstack-api-version": "placement 1.39"}
    )
    assert result.status_code == 400
    (error,) = result.json["errors"]
    assert error["status"] == 400 and error["title"] == "Bad Request"
    assert error["code"] == code
    assert error["request_id"] == result.headers["openstack-request-id"]
    assert "microversion" in error["detail"] or "version" in error["detail"]


@pytest.mark.parametrize("strategy", ["noauth", "keystone"])
def test_the_document_is_open_without_a_token(sqlite_engine, strategy):
    client = falcon.testing.TestClient(
        create_app(Settings.of(auth_strategy=strategy), sqlite_engine)
    )
    assert client.simulate_get("/openapi.json").status_code == 200
    assert client.simulate_get("/").status_code == 200
    assert client.simulate_get("/resource_providers").status_code == 401
    doc = client.simulate_get("/openapi.json").json
    assert doc["paths"]["/openapi.json"]["get"]["security"] == []
    assert doc["paths"]["/"]["get"]["security"] == []
    assert "security" not in doc["paths"]["/resource_providers"]["get"]
    assert doc["security"] == [{"token": []}]


def served_at(path: str, method: str, version: str) -> bool:
    """Whether the route table's responder answers at `version` (its `since` gate)."""
    resource = dict(ROUTES)[path]
    gate = getattr(getattr(resource, f"on_{method.lower()}"), "version_gate", None)
    return gate is None or gate(microversion.as_tuple(version))


def test_the_schema_table_holds_exactly_the_operations_of_the_route_table(app):
    served = {
        (m.method, route.path)
        for route in falcon.inspect.inspect_routes(app)
        for m in route.methods
        if not m.internal
    }
    assert set(OPERATIONS) == served


def rows_of(op: Operation) -> dict[str, Rows]:
    return {"answers": op.answers, "query": op.query, "body": op.body}


def test_rows_are_oldest_first_and_cover_every_served_microversion():
    for (method, path), op in OPERATIONS.items():
        for field, rows in rows_of(op).items():
            firsts = [first for first, _ in rows]
            assert firsts == sorted(set(firsts)), (method, path, field)
            for version in microversion.VERSIONS:
                if rows and served_at(path, method, version):
                    at(rows, microversion.as_tuple(version))  # no LookupError


def test_the_document_says_what_the_schema_table_says(app):
    for version in microversion.VERSIONS:
        v = microversion.as_tuple(version)
        paths = document(app, version)["paths"]
        for (method, path), op in OPERATIONS.items():
            if not served_at(path, method, version):
                continue
            found = paths[path][method.lower()]
            body = op.body_at(v)
            if body is None:
                assert "requestBody" not in found
            else:
                assert found["requestBody"]["content"]["application/json"]["schema"] == body
            params = {(p["in"], p["name"]): p for p in found.get("parameters", ())}
            query = op.query_at(v) or {}
            for name, schema in query.get("properties", {}).items():
                assert params.pop(("query", name))["schema"] == schema
            if "patternProperties" in query:
                groups = params.pop(("query", "request_groups"))
                assert groups["schema"]["patternProperties"] == query["patternProperties"]
                assert groups["style"] == "form" and groups["explode"] is True
            for name in re.findall(r"{(\w+)}", path):
                schema = params.pop(("path", name))["schema"]
                assert schema == op.path.get(name, schema)
            assert [kind for kind, _ in params] in ([], ["header"]), (method, path)
            answers = {
                int(status): answer.get("content", {}).get("application/json", {}).get("schema")
                for status, answer in found["responses"].items()
                if status.startswith("2")
            }
            assert answers == op.answers_at(v), (method, path, version)


def first_in_effect(rows: Rows, method: str, path: str) -> dict[int, str]:
    """Row index -> the first microversion the operation answers with that row in effect."""
    found: dict[int, str] = {}
    for version in microversion.VERSIONS:
        if rows and served_at(path, method, version):
            v = microversion.as_tuple(version)
            index = max(i for i, (first, _) in enumerate(rows) if v >= first)
            found.setdefault(index, version)
    return found


def test_handlers_validate_with_the_row_of_their_microversion(make_client, monkeypatch):
    """Each row of a body or query table, at the first microversion it is in
    effect: the handler validates with that very schema (and refuses what it refuses)."""
    client = make_client()
    provider = client.simulate_post("/resource_providers", json={"name": "p"}).json["uuid"]
    fill = {"uuid": provider, "consumer_uuid": str(uuid.uuid4()), "sandbox": str(uuid.uuid4())}
    fill |= {"resource_class": "VCPU", "name": "CUSTOM_GOLD"}
    seen: list[dict] = []
    validate = common.validate

    def spy(data, schema, *args):
        seen.append(schema)
        return validate(data, schema, *args)

    monkeypatch.setattr(common, "validate", spy)
    checked = 0
    for (method, path), op in OPERATIONS.items():
        url = path.format(**fill)
        for field in ("body", "query"):
            rows = getattr(op, field)
            for index, version in first_in_effect(rows, method, path).items():
                schema = rows[index][1]
                if schema is None:
                    continue
                seen.clear()
                found = client.simulate_request(
                    method,
                    url,
                    headers={"openstack-api-version": f"placement {version}"},
                    **(
                        {"body": b'"no document"', "content_type": "application/json"}
                        if field == "body"
                        else {"query_string": "not_a_parameter=1"}
                    ),
                )
                where = (method, path, field, version)
                assert found.status_code == 400, (where, found.text)
                assert [s for s in seen if s is schema] == [schema], where
                checked += 1
    assert checked >= 30


def test_operations_name_the_microversion_and_answer_placement_errors(app):
    doc = document(app, "1.20")
    create = doc["paths"]["/resource_providers"]["post"]
    header = next(p for p in create["parameters"] if p["in"] == "header")
    assert header["name"] == "OpenStack-API-Version" and header["required"] is True
    assert header["schema"]["enum"] == ["placement 1.20"]
    assert "200" in create["responses"] and "201" not in create["responses"]  # body from 1.20
    assert "201" in document(app, "1.19")["paths"]["/resource_providers"]["post"]["responses"]
    error = create["responses"]["409"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/Error"}
    fields = doc["components"]["schemas"]["Error"]["properties"]["errors"]["items"]
    assert set(fields["properties"]) == {"status", "title", "detail", "code", "request_id"}


@pytest.mark.parametrize("prefix", ["", "/placement"])
def test_the_served_document_lists_healthcheck_and_metrics(sqlite_engine, prefix):
    """Issue 40, item 11: `/openapi.json` of the server as run (`tally serve`, the WSGI
    entry) omitted the two paths it serves beside Placement. They are at the root
    whatever prefix the document is read under; /healthcheck needs no token."""
    from tally.serve.compose import create_server

    served = create_server(Settings.of(lab="off"), sqlite_engine)
    client = falcon.testing.TestClient(lambda environ, start: served(environ, start))
    doc = client.simulate_get(f"{prefix}/openapi.json").json
    schemathesis.openapi.from_dict(doc).validate()
    health, metrics = doc["paths"]["/healthcheck"], doc["paths"]["/metrics"]
    assert set(health) == {"servers", "get", "head"} and set(metrics) == {"servers", "get"}
    assert health["servers"] == metrics["servers"] == [{"url": "/"}]
    assert health["get"]["security"] == health["head"]["security"] == []
    assert "security" not in metrics["get"]  # the document's token
    assert set(metrics["get"]["responses"]) == {"200", "401", "403"}
    assert client.simulate_get("/healthcheck").status_code == 200
    assert client.simulate_get("/metrics").status_code == 401
    assert "/healthcheck" not in document(create_app(Settings.of(), sqlite_engine))["paths"]
