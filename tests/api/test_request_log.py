"""The request log line: Placement's, then the global request id a caller sent
(`X-OpenStack-Request-ID: req-<uuid>`, as oslo.middleware accepts it), the user and the
project, so operators' searches for either id, or for a project, find the request."""

from __future__ import annotations

import logging
import uuid

import falcon.testing
import pytest

from tally.config import Settings
from tally.placement.app import create_app


@pytest.fixture
def client(sqlite_engine):
    return falcon.testing.TestClient(create_app(Settings.of(), sqlite_engine))


def logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tally.requestlog"]


def test_a_global_request_id_is_logged_with_user_and_project(client, caplog):
    caplog.set_level(logging.INFO, logger="tally.requestlog")
    nova = f"req-{uuid.uuid4()}"
    result = client.simulate_get(
        "/resource_providers",
        headers={
            "x-auth-token": "nova:service",
            "x-roles": "admin",
            "x-openstack-request-id": nova,
        },
    )
    assert result.status_code == 200
    local = result.headers["openstack-request-id"]
    assert local != nova and local.startswith("req-")  # the local id stays ours
    assert result.headers["x-openstack-request-id"] == local
    [line] = logged(caplog)
    assert line == (
        f'[{local}] 127.0.0.1 "GET /resource_providers" status: 200 len: 25 '
        f"microversion: 1.0 global_request_id: {nova} user: nova project: service"
    )


@pytest.mark.parametrize(
    "sent",
    [
        "req-not-a-uuid",
        "1045f18b-710a-47ae-818b-5e753885b3b1",  # no req- prefix
        "REQ-47859B9B-60F0-41F9-816E-CFD6AC5C91BB",
        "req-4dece224-3002-4592-8286-e888082ffb60\nforged line",
    ],
)
def test_anything_else_is_ignored(client, caplog, sent):
    caplog.set_level(logging.INFO, logger="tally.requestlog")
    client.simulate_get(
        "/resource_providers", headers={"x-auth-token": "admin", "x-openstack-request-id": sent}
    )
    [line] = logged(caplog)
    assert line.endswith(" global_request_id: - user: admin project: admin")


def test_an_unauthenticated_request_logs_dashes(client, caplog):
    caplog.set_level(logging.INFO, logger="tally.requestlog")
    nova = f"req-{uuid.uuid4()}"
    client.simulate_get("/resource_providers", headers={"x-openstack-request-id": nova})
    [line] = logged(caplog)
    assert '"GET /resource_providers" status: 401 ' in line
    assert line.endswith(f" global_request_id: {nova} user: - project: -")
