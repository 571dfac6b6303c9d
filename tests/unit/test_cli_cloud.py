"""`--os-cloud`: clouds.yaml through openstacksdk, a password login to a (fake)
Keystone v3 through keystoneauth1, Placement found in the service catalog by
interface and region, and the token sent to Tally on every request.

    fake Keystone (thread)  POST /v3/auth/tokens -> token "admin" + catalog:
        placement  public   RegionTwo  http://127.0.0.1:1/nowhere   (nothing listens)
        placement  internal RegionTwo  http://127.0.0.1:<tally>/placement
        placement  internal RegionOne  http://127.0.0.1:1/nowhere
    Tally (wsgiref thread) under the /placement prefix, noauth: token `admin` is admin
"""

from __future__ import annotations

import json
import threading
import wsgiref.simple_server
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from tally.cli.main import cli
from tally.config import Settings
from tally.placement.app import create_app
from tests.live import JsonRequestHandler

pytest.importorskip("openstack")


class FakeKeystone(JsonRequestHandler):
    catalog: list = []
    logins: list = []

    def do_GET(self) -> None:  # version discovery of the auth_url
        base = f"http://127.0.0.1:{self.server.server_port}/v3/"
        version = {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": base}],
        }
        if self.path.rstrip("/") == "/v3":
            self.reply(200, {"version": version})
        else:
            self.reply(300, {"versions": {"values": [version]}})

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        self.logins.append(json.loads(self.rfile.read(length)))
        token = {
            "methods": ["password"],
            "expires_at": "2099-01-01T00:00:00.000000Z",
            "issued_at": "2020-01-01T00:00:00.000000Z",
            "user": {"id": "u1", "name": "admin", "domain": {"id": "default", "name": "Default"}},
            "project": {
                "id": "p1",
                "name": "admin",
                "domain": {"id": "default", "name": "Default"},
            },
            "roles": [{"id": "r1", "name": "admin"}],
            "catalog": self.catalog,
        }
        self.reply(201, {"token": token}, {"X-Subject-Token": "admin"})


def serve_in_thread(server) -> threading.Thread:  # noqa: ANN001
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


class Placement(NamedTuple):
    url: str
    tokens: list[str]  # the x-auth-token of every request it got


@pytest.fixture
def placement(sqlite_engine) -> Iterator[Placement]:
    """Tally over real HTTP, mounted under /placement."""
    app = create_app(Settings.of(), sqlite_engine)
    tokens: list[str] = []

    def mounted(environ, start_response):  # noqa: ANN001, ANN202
        tokens.append(environ.get("HTTP_X_AUTH_TOKEN"))
        path = environ["PATH_INFO"]
        if not path.startswith("/placement"):
            start_response("404 Not Found", [("content-type", "text/plain")])
            return [b"not here"]
        environ["PATH_INFO"] = path[len("/placement") :] or "/"
        return app(environ, start_response)

    class Quiet(wsgiref.simple_server.WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = wsgiref.simple_server.make_server("127.0.0.1", 0, mounted, handler_class=Quiet)
    serve_in_thread(server)
    yield Placement(f"http://127.0.0.1:{server.server_port}/placement", tokens)
    server.shutdown()
    server.server_close()


@pytest.fixture
def cloud_env(tmp_path: Path, placement: Placement, monkeypatch) -> Iterator[dict[str, str]]:
    keystone = ThreadingHTTPServer(("127.0.0.1", 0), FakeKeystone)
    serve_in_thread(keystone)
    nowhere = "http://127.0.0.1:1/nowhere"
    FakeKeystone.logins = []
    endpoints = [("public", "RegionTwo", nowhere), ("internal", "RegionTwo", placement.url)]
    endpoints.append(("internal", "RegionOne", nowhere))
    FakeKeystone.catalog = [
        {
            "type": "placement",
            "name": "placement",
            "id": "s1",
            "endpoints": [
                {
                    "id": f"e{n}",
                    "interface": interface,
                    "region": region,
                    "region_id": region,
                    "url": url,
                }
                for n, (interface, region, url) in enumerate(endpoints)
            ],
        }
    ]
    auth_url = f"http://127.0.0.1:{keystone.server_port}/v3"
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n"
        "  lab:\n"
        "    regions: [RegionTwo, RegionOne, RegionThree]\n"
        "    interface: internal\n"
        "    identity_api_version: 3\n"
        "    auth:\n"
        f"      auth_url: {auth_url}\n"
        "      username: admin\n"
        "      password: secret\n"
        "      project_name: admin\n"
        "      user_domain_name: Default\n"
        "      project_domain_name: Default\n"
    )
    for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_REGION_NAME", "OS_INTERFACE", "TALLY_URL"):
        monkeypatch.delenv(name, raising=False)
    yield {"OS_CLIENT_CONFIG_FILE": str(clouds)}
    keystone.shutdown()
    keystone.server_close()


def test_os_cloud_logs_in_and_finds_placement_in_the_catalog(cloud_env, placement):
    result = CliRunner().invoke(
        cli, ["--os-cloud", "lab", "provider", "create", "compute-1", "-f", "json"], env=cloud_env
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["name"] == "compute-1"
    (login,) = FakeKeystone.logins
    assert login["auth"]["identity"]["password"]["user"]["name"] == "admin"
    assert set(placement.tokens) == {"admin"}  # the Keystone token, on every request

    listed = CliRunner().invoke(
        cli, ["provider", "list", "-f", "value", "-c", "name"], env={**cloud_env, "OS_CLOUD": "lab"}
    )
    assert (listed.exit_code, listed.stdout) == (0, "compute-1\n")


def test_the_interface_and_region_pick_the_endpoint(cloud_env):
    public = CliRunner().invoke(
        cli, ["--os-cloud", "lab", "--os-interface", "public", "provider", "list"], env=cloud_env
    )
    assert public.exit_code == 1
    assert "cannot reach Placement at http://127.0.0.1:1/nowhere" in public.stderr

    def in_region(region: str):  # noqa: ANN202
        args = ["--os-cloud", "lab", "--os-region-name", region, "provider", "list"]
        return CliRunner().invoke(cli, args, env=cloud_env)

    assert in_region("RegionTwo").exit_code == 0
    other = in_region("RegionOne")
    assert other.exit_code == 1 and "http://127.0.0.1:1/nowhere" in other.stderr
    missing = in_region("RegionThree")
    assert missing.exit_code == 1
    assert "internal endpoint for placement service in RegionThree region not found" in (
        missing.stderr
    )


def test_an_unknown_cloud_is_a_clear_error(cloud_env):
    result = CliRunner().invoke(cli, ["--os-cloud", "nope", "trait", "list"], env=cloud_env)
    assert result.exit_code == 1
    assert "cannot reach Placement through cloud 'nope'" in result.stderr
