"""`tally history`, run with click's CliRunner against Tally's app in-process (and
against a Placement without the history, as upstream is).

    compute-1 (RP)  VCPU 32        <- SERVER holds 20, then 24
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

import httpx
import pytest
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.history import COLUMNS
from tally.cli.main import cli
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.placement.app import create_app

RP = "6f0c3b4e-8d3a-4a55-9c2e-0e1f5a7a4d10"
SERVER = "2d9d4c1e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
OWNER = "--project-id demo --user-id alice --consumer-type INSTANCE"

Run = Callable[..., Result]


@pytest.fixture
def tally(sqlite_engine) -> Run:
    """run(*args, code=0): the CLI (args, or one command line) against the app."""
    transport = httpx.WSGITransport(app=create_app(Settings.of(), sqlite_engine))

    def run(*args: str, code: int = 0) -> Result:
        if len(args) == 1:
            args = tuple(shlex.split(args[0]))
        client = PlacementClient("http://tally", transport=transport)
        result = CliRunner().invoke(cli, list(args), obj=Context.for_client(client))
        assert result.exit_code == code, result.output
        return result

    run("provider", "create", "compute-1", "--uuid", RP)
    run("provider", "inventory", "set", RP, "--resource", "VCPU=32")
    run(f"provider allocation set {SERVER} --allocation rp={RP},VCPU=20 {OWNER}")
    run(f"provider allocation set {SERVER} --allocation rp={RP},VCPU=24 {OWNER}")
    return run


def rows(result: Result) -> list[dict]:
    return json.loads(result.stdout)


def test_a_consumers_history_newest_first(tally):
    found = rows(tally(f"history {SERVER} -f json"))
    assert [(r["before"], r["after"]) for r in found] == [(20, 24), (None, 20)]
    assert all(list(r) == list(COLUMNS) for r in found)  # the keys are the columns
    assert {(r["action"], r["provider"], r["resource_class"]) for r in found} == {
        ("allocation", RP, "VCPU")
    }
    assert found[0]["consumer_type"] == "INSTANCE" and found[0]["user_id"] == "admin"


def test_a_providers_history_by_name_since_a_while(tally):
    found = rows(tally("history --provider compute-1 --since 1h -f json"))
    assert [r["action"] for r in found] == [
        "allocation",
        "allocation",
        "inventory",
        "provider.create",
    ]
    assert rows(tally("history --provider compute-1 --until 1h -f json")) == []
    assert len(rows(tally("history --limit 2 -f json"))) == 2
    assert len(rows(tally("history -f json"))) == 4


def test_a_table_and_chosen_columns(tally):
    table = tally(f"history {SERVER}").stdout  # the default columns; the rest with --long
    assert "allocation" in table and "req-" not in table
    assert "req-" in tally(f"history {SERVER} --long").stdout
    value = tally(f"history {SERVER} -f value -c before -c after").stdout
    assert value.splitlines() == ["20 24", " 20"]


def test_bad_input_is_127(tally):
    assert "is not a uuid" in tally("history not-a-uuid", code=127).output
    tally("history --since soon", code=127)
    tally("history --limit 0", code=127)


def test_against_a_placement_without_it(sqlite_engine):
    def upstream(request: httpx.Request) -> httpx.Response:
        body = {
            "errors": [
                {"status": 404, "title": "Not Found", "detail": "The resource could not be found."}
            ]
        }
        return httpx.Response(404, json=body)

    client = PlacementClient(
        "http://upstream", transport=httpx.MockTransport(upstream), version="1.39"
    )
    result = CliRunner().invoke(cli, ["history", SERVER], obj=Context.for_client(client))
    assert result.exit_code == 1
    assert "this Placement has no claim history" in result.stderr
