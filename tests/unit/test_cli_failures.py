"""`tally failures` and `tally why REQUEST-ID`, run with click's CliRunner against
Tally's app in-process, over records noted through a Recorder on its database (and
against a Placement without them, as upstream is).

    req-old / nova-1   resources=VCPU:64          verdict: constraints and closest
    req-new / nova-2   resources=DISK_GB:10&required=CUSTOM_SSD   verdict: {}
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Callable

import httpx
import pytest
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.failures import COLUMNS
from tally.cli.main import cli
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.placement.app import create_app
from tally.placement.ledger.failure_records import FailureNote, Recorder

ROOT = "6f0c3b4e-8d3a-4a55-9c2e-0e1f5a7a4d10"
VERDICT = {
    "constraints": [
        {"constraint": "trait HW_CPU_X86_AVX2", "rules_out": 2},
        {"constraint": "VCPU capacity", "rules_out": 7, "detail": "64 asked"},
        {"constraint": "member_of", "rules_out": 0},
    ],
    "closest": [{"root": ROOT, "name": "compute-1", "reasons": ["VCPU 48 free"], "distance": 1.16}],
}

Run = Callable[..., Result]


def noted(request_id: str, global_id: str, query: str, verdict: dict, ago: dt.timedelta):
    return FailureNote(
        created_at=dt.datetime.now(dt.UTC).replace(tzinfo=None) - ago,
        request_id=request_id,
        global_request_id=global_id,
        user_id="alice",
        project_id="demo",
        microversion="1.36",
        query=query,
        reason="capacity" if verdict else None,
        verdict=verdict,
    )


@pytest.fixture
def tally(sqlite_engine) -> Run:
    """run(*args, code=0): the CLI (args, or one command line) against the app."""
    recorder = Recorder(sqlite_engine)
    recorder.note(noted("req-old", "nova-1", "resources=VCPU:64", VERDICT, dt.timedelta(hours=2)))
    query = "resources=DISK_GB:10&required=CUSTOM_SSD"
    recorder.note(noted("req-new", "nova-2", query, {}, dt.timedelta(minutes=1)))
    recorder.stop()
    transport = httpx.WSGITransport(app=create_app(Settings.of(), sqlite_engine))

    def run(*args: str, code: int = 0) -> Result:
        if len(args) == 1:
            args = tuple(shlex.split(args[0]))
        client = PlacementClient("http://tally", transport=transport)
        result = CliRunner().invoke(cli, list(args), obj=Context.for_client(client))
        assert result.exit_code == code, result.output
        return result

    return run


def requests(result: Result) -> list[str]:
    return [r["request_id"] for r in json.loads(result.stdout)]


def test_failures_newest_first_with_filters(tally):
    found = json.loads(tally("failures -f json").stdout)
    assert [r["request_id"] for r in found] == ["req-new", "req-old"]
    assert all(list(r) == list(COLUMNS) for r in found)  # the keys are the columns
    assert found[1]["global_request_id"] == "nova-1" and found[1]["reason"] == "capacity"
    assert requests(tally("failures --request-id nova-1 -f json")) == ["req-old"]
    assert requests(tally("failures --since 1h -f json")) == ["req-new"]
    assert requests(tally("failures --until 1h -f json")) == ["req-old"]
    assert requests(tally("failures --class VCPU -f json")) == ["req-old"]
    assert requests(tally("failures --trait CUSTOM_SSD -f json")) == ["req-new"]
    assert requests(tally("failures --limit 1 -f json")) == ["req-new"]


def test_failures_as_a_table_and_values(tally):
    table = tally("failures").stdout
    assert "req-old" in table and "resources=VCPU:64" in table and "nova-2" in table
    values = tally("failures -f value -c request_id -c reason").stdout
    assert values.splitlines() == ["req-new ", "req-old capacity"]


def test_why_prints_the_record_and_its_verdict(tally):
    out = tally("why nova-1").stdout
    lines = out.splitlines()
    assert "request: req-old" in lines and "global request: nova-1" in lines
    assert "who: user alice, project demo" in lines
    assert "query: resources=VCPU:64" in lines and "microversion: 1.36" in lines
    order = [out.index(c) for c in ("VCPU capacity", "trait HW_CPU_X86_AVX2", "member_of")]
    assert order == sorted(order)  # the constraint ruling out most trees first
    assert "closest trees:" in out and ROOT in out and "VCPU 48 free" in out
    assert "1.16" in out.split("closest trees:")[1]


def test_why_by_request_id_without_a_verdict(tally):
    out = tally("why req-new").stdout
    assert "query: resources=DISK_GB:10&required=CUSTOM_SSD" in out
    assert "constraints" not in out and "closest" not in out


def test_why_as_json(tally):
    (record,) = json.loads(tally("why req-old -f json").stdout)
    assert record["verdict"] == VERDICT and record["request_id"] == "req-old"


def test_why_an_unknown_id_is_127_in_one_line(tally):
    result = tally("why req-nothing", code=127)
    assert result.stderr == "Error: no failed search has the request id 'req-nothing'\n"
    assert result.stdout == ""


def test_against_a_placement_without_them():
    def upstream(request: httpx.Request) -> httpx.Response:
        body = {"errors": [{"status": 404, "title": "Not Found", "detail": "Not found."}]}
        return httpx.Response(404, json=body)

    client = PlacementClient(
        "http://upstream", transport=httpx.MockTransport(upstream), version="1.39"
    )
    for args in (["failures"], ["why", "req-1"]):
        result = CliRunner().invoke(cli, args, obj=Context.for_client(client))
        assert result.exit_code == 1
        assert "this Placement keeps no failed searches" in result.stderr
