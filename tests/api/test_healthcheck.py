"""`/healthcheck` as oslo.middleware's healthcheck answers: open without a token,
200 `OK` while the database answers `SELECT 1`, 503 when it does not; the JSON forms,
detailed only for an admin."""

from __future__ import annotations

import json

import falcon.testing
import pytest

from tally.config import Settings
from tally.db.engine import make_engine
from tally.serve.compose import create_server
from tally.serve.health import Healthcheck
from tests.live import free_port


@pytest.fixture
def up(sqlite_engine):
    return falcon.testing.TestClient(create_server(Settings.of(lab="off"), sqlite_engine))


@pytest.fixture
def down():
    url = f"postgresql+psycopg://tally@127.0.0.1:{free_port()}/tally"  # nothing listens
    engine = make_engine(url)
    yield falcon.testing.TestClient(create_server(Settings.of(database_url=url), engine))
    engine.dispose()


def test_healthy_without_a_token(up):
    result = up.simulate_get("/healthcheck")
    assert (result.status_code, result.text) == (200, "OK")
    assert result.headers["content-type"] == "text/plain; charset=UTF-8"
    head = up.simulate_head("/healthcheck")
    assert (head.status_code, head.text) == (204, "")  # oslo.middleware's HEAD


def test_healthy_json_simple_and_detailed(up):
    simple = up.simulate_get("/healthcheck", headers={"accept": "application/json"})
    assert simple.status_code == 200
    assert simple.json == {"detailed": False, "reasons": ["OK"]}
    for token in ("nova:service", "alice:admin"):
        result = up.simulate_get(
            "/healthcheck", headers={"accept": "application/json", "x-auth-token": token}
        )
        assert result.json == {"detailed": False, "reasons": ["OK"]}, token
    detailed = up.simulate_get(
        "/healthcheck", headers={"accept": "application/json", "x-auth-token": "admin"}
    ).json
    assert detailed["detailed"] is True
    [reason] = detailed["reasons"]
    assert reason["reason"] == "OK" and reason["class"] == "DatabaseCheck"
    assert reason["details"].startswith("sqlite answered SELECT 1 in ")
    assert {"python_version", "now", "platform", "gc", "threads", "greenthreads"} <= set(detailed)


def test_a_database_that_is_down_is_503(down):
    result = down.simulate_get("/healthcheck")
    assert (result.status_code, result.text) == (503, "database unavailable")
    assert down.simulate_head("/healthcheck").status_code == 503
    simple = down.simulate_get("/healthcheck", headers={"accept": "application/json"})
    assert (simple.status_code, simple.json) == (
        503,
        {"detailed": False, "reasons": ["database unavailable"]},
    )
    detailed = down.simulate_get(
        "/healthcheck", headers={"accept": "application/json", "x-auth-token": "admin"}
    )
    [reason] = detailed.json["reasons"]
    assert reason["reason"] == "database unavailable"
    assert reason["details"].startswith("postgresql: ") and "refused" in reason["details"]
    assert "tally@" not in json.dumps(detailed.json)  # no URL, no credentials


def test_other_methods_and_paths(up):
    assert up.simulate_post("/healthcheck").status_code == 405
    assert up.simulate_get("/healthcheck/x").status_code == 404
    assert up.simulate_get("/placement/healthcheck").status_code != 200


@pytest.mark.parametrize(
    ("strategy", "headers", "admin"),
    [
        ("keystone", {"HTTP_X_IDENTITY_STATUS": "Confirmed", "HTTP_X_ROLES": "reader,admin"}, 1),
        ("keystone", {"HTTP_X_IDENTITY_STATUS": "Invalid", "HTTP_X_ROLES": "admin"}, 0),
        ("keystone", {"HTTP_X_AUTH_TOKEN": "admin"}, 0),
        ("noauth", {"HTTP_X_AUTH_TOKEN": "admin"}, 1),
        ("noauth", {"HTTP_X_AUTH_TOKEN": "admin", "HTTP_X_ROLES": "reader"}, 0),
        ("noauth", {"HTTP_X_AUTH_TOKEN": "bob", "HTTP_X_ROLES": "admin"}, 1),
        ("noauth", {"HTTP_X_ROLES": "admin"}, 0),
    ],
)
def test_who_is_an_admin(sqlite_engine, strategy, headers, admin):
    assert Healthcheck(sqlite_engine, strategy).is_admin(headers) is bool(admin)


def test_a_damaged_database_is_503_though_select_1_answers(sqlite_engine):
    """SQLite answers `SELECT 1` on a file whose pages are garbage; the errors the
    requests met are what the load balancer must hear about."""
    client = falcon.testing.TestClient(create_server(Settings.of(lab="off"), sqlite_engine))
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    for n in range(200):
        made = client.simulate_post(
            "/resource_providers", json={"name": f"rp-{n:03d}-{'x' * 150}"}, headers=headers
        )
        assert made.status_code == 200
    with sqlite_engine.connect() as conn:
        page = conn.exec_driver_sql("PRAGMA page_size").scalar()
        root = conn.exec_driver_sql(
            "SELECT rootpage FROM sqlite_master WHERE name = 'resource_providers'"
        ).scalar()
    sqlite_engine.dispose()  # everything folded into the file, nothing cached
    with open(sqlite_engine.url.database, "r+b") as damaged:  # one table's root page
        damaged.seek((root - 1) * page)
        damaged.write(b"\xa5" * page)
    write = client.simulate_post("/resource_providers", json={"name": "one more"}, headers=headers)
    assert write.status_code >= 500
    result = client.simulate_get(
        "/healthcheck", headers={"accept": "application/json", "x-auth-token": "admin"}
    )
    assert result.status_code == 503
    [reason] = result.json["reasons"]
    assert reason["reason"] == "database damaged"
    assert "malformed" in reason["details"]
