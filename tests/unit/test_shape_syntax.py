"""One shape syntax wherever a shape is typed (issue 29, item 4): `CLASS=N` and
`CLASS:N`, comma-separated, read by `tally.nova.shapes.parse_shape` for `tally capacity`,
`tally explain candidates`, the resource filters of `provider list` and
`allocation candidate list`, and the page's capacity box; a bad piece is named.

    cn-1  VCPU 4, MEMORY_MB 4096        cn-2  VCPU 2
"""

from __future__ import annotations

import json
import re

import falcon.testing
import httpx
import pytest
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.main import cli
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.placement.app import create_app
from tally.serve.page import create_page

SHAPES = ["VCPU=1,MEMORY_MB=1024", "VCPU:1,MEMORY_MB:1024", "VCPU=1, MEMORY_MB:1024"]


@pytest.mark.parametrize("text", SHAPES)
def test_both_separators_read_the_same(text):
    from tally.nova.shapes import parse_shape

    assert parse_shape(text) == {"VCPU": 1, "MEMORY_MB": 1024}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no resources given"),
        ("VCPU", "'VCPU' is not CLASS=N or CLASS:N"),
        ("VCPU=1,MEMORY_MB", "'MEMORY_MB' is not CLASS=N or CLASS:N"),
        ("VCPU=1,vcpu:2", "'vcpu:2': 'vcpu' is not a resource class name (upper case: VCPU)"),
        ("VCPU=1,DISK_GB=ten", "'DISK_GB=ten': the amount 'ten' is not a whole number"),
        ("VCPU:-1", "'VCPU:-1': the amount '-1' is not a whole number"),
        ("VCPU=0", "'VCPU=0': the amount must be at least 1"),
        ("VCPU=1,VCPU:2", "'VCPU:2': VCPU is given twice"),
        ("VCPU=1,", "has an empty piece"),
        ("=4", "'=4' names no resource class"),
        ("VCPU=4:2", "'VCPU=4:2' is not CLASS=N or CLASS:N"),
    ],
)
def test_a_bad_piece_is_named(text, says):
    from tally.nova.shapes import ShapeError, parse_shape

    with pytest.raises(ShapeError) as caught:
        parse_shape(text)
    assert says in str(caught.value)


@pytest.fixture
def placement(sqlite_engine) -> falcon.App:
    app = create_app(Settings.of(), sqlite_engine)
    admin = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
    client = falcon.testing.TestClient(app, headers=admin)
    for name, inventory in (("cn-1", {"VCPU": 4, "MEMORY_MB": 4096}), ("cn-2", {"VCPU": 2})):
        rp = client.simulate_post("/resource_providers", json={"name": name}).json["uuid"]
        body = {
            "resource_provider_generation": 0,
            "inventories": {rc: {"total": n} for rc, n in inventory.items()},
        }
        put = client.simulate_put(f"/resource_providers/{rp}/inventories", json=body)
        assert put.status_code == 200, put.text
    return app


def tally(app: falcon.App, *args: str) -> Result:
    transport = httpx.WSGITransport(app=app)
    client = PlacementClient("http://tally", transport=transport)
    return CliRunner().invoke(cli, list(args), obj=Context.for_client(client))


def answer(result: Result) -> object:
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("text", SHAPES)
def test_every_command_takes_both(placement, text):
    capacity = answer(tally(placement, "capacity", "--resource", text, "-f", "json"))
    assert [(r["provider"], r["fits"]) for r in capacity] == [("cn-1", 4)]
    explained = answer(tally(placement, "explain", "candidates", "--resource", text, "-f", "json"))
    assert explained["candidates"] == 1 and explained["trees"] == 2
    providers = answer(tally(placement, "provider", "list", "--resource", text, "-f", "json"))
    assert [p["name"] for p in providers] == ["cn-1"]
    candidates = tally(placement, "allocation", "candidate", "list", "--resource", text)
    assert candidates.exit_code == 0 and candidates.stdout.count("VCPU=1") == 1


@pytest.mark.parametrize(
    "command",
    [
        ["capacity"],
        ["explain", "candidates"],
        ["provider", "list"],
        ["allocation", "candidate", "list"],
    ],
)
def test_every_command_names_the_bad_piece(placement, command):
    result = tally(placement, *command, "--resource", "VCPU=1,vcpu:2")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "'vcpu:2': 'vcpu' is not a resource class name (upper case: VCPU)" in result.stderr


@pytest.mark.parametrize("text", SHAPES)
def test_the_pages_capacity_box_takes_both(placement, sqlite_engine, text):
    page = falcon.testing.TestClient(create_page(Settings.of(), sqlite_engine))
    result = page.simulate_get(
        "/", root_path="/tally/ui", headers={"x-auth-token": "admin"}, params={"shape": text}
    )
    assert result.status_code == 200, result.text
    table = re.search(r'<table id="capacity-result">.*?</table>', result.text, re.S).group(0)
    assert re.findall(r">(cn-\d)</a></th><td class=\"num\">(\d+)<", table) == [("cn-1", "4")]
