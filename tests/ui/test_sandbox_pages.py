"""The what-if pages (issue 41): the sandboxes alive, and one sandbox's diff (per
provider used and capacity before and after, a row that would not fit marked, the
steps refused with why), read-only, escaped, linked from every page.

    <b>cn-1</b>  VCPU 8  <- SERVER holds 6
    cn-2         VCPU 4
"""

from __future__ import annotations

import html
import re
import uuid as uuidlib

import falcon.testing
import pytest

from tally.config import Settings
from tally.serve.page import create_page
from tests.ui.test_ui_page import ROOT, claim, get, make_provider

SANDBOXES = "/tally/v1/sandboxes"


@pytest.fixture
def page(sqlite_engine):
    return falcon.testing.TestClient(create_page(Settings.of(), sqlite_engine))


@pytest.fixture
def world(client):
    one = make_provider(client, "<b>cn-1</b>", {"VCPU": {"total": 8}})
    two = make_provider(client, "cn-2", {"VCPU": {"total": 4}})
    server = claim(client, one, {"VCPU": 6})
    return {"one": one, "two": two, "server": server}


def sandbox(client, *changes: dict) -> str:
    made = client.simulate_post(SANDBOXES, json={}).json["id"]
    if changes:
        done = client.simulate_post(f"{SANDBOXES}/{made}/changes", json={"changes": list(changes)})
        assert done.status_code == 200, done.text
    return made


def cells(text: str, table: str) -> list[list[str]]:
    """The text of each cell of each body row of the table."""
    body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', text, re.S).group(1)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    cell = r"<t[hd][^>]*>(.*?)</t[hd]>"
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(cell, r, re.S)] for r in rows]


def test_the_list_links_each_sandbox_alive(page, client, world):
    assert "No sandbox is alive." in get(page, "/sandboxes").text
    older = sandbox(client, {"kind": "disable", "provider": world["two"]})
    newer = sandbox(client)
    text = get(page, "/sandboxes").text
    assert {row[0] for row in cells(text, "sandboxes")} == {older, newer}
    assert f'href="{ROOT}/sandboxes/{older}"' in text
    assert f'href="{ROOT}/sandboxes"' in get(page).text  # linked from every page
    client.simulate_delete(f"{SANDBOXES}/{newer}")
    assert [row[0] for row in cells(get(page, "/sandboxes").text, "sandboxes")] == [older]


def test_a_sandbox_shows_each_provider_before_and_after_and_the_refused_steps(page, client, world):
    box = sandbox(
        client,
        {"kind": "move", "consumer": world["server"], "to": world["two"]},  # refused: 4 < 6
        {"kind": "inventory", "provider": world["one"], "resource_class": "VCPU", "total": 4},
        {"kind": "boot", "query": "resources=VCPU:2", "count": 1},
    )
    before = client.simulate_get("/tally/v1/amounts").json
    answer = get(page, f"/sandboxes/{box}")
    assert answer.status_code == 200
    text = answer.text
    assert "1 applied, 2 refused" in text
    rows = cells(text, "providers")
    name = html.escape("<b>cn-1</b>")
    assert "<b>cn-1</b>" not in text and name in text
    # cn-1's capacity 8 -> 4 refused (6 used), then a boot takes 2 of its 8
    assert rows == [[name, "VCPU", "6", "8", "8", "8", ""]]
    failed = cells(text, "failed")
    assert [(r[0], r[1], r[3], r[4]) for r in failed] == [
        ("1", "move", "409", "tally.sandbox.no_host"),
        ("2", "inventory", "409", "placement.inventory.inuse"),
    ]
    assert world["server"] in failed[1][5]  # who holds it, as the real 409 says
    assert client.simulate_get("/tally/v1/amounts").json == before  # read-only
    assert client.simulate_get(f"{SANDBOXES}/{box}").json["steps"] == 3


def test_a_row_that_would_not_fit_says_so_in_words(page, client, world, make_client):
    lenient = make_client(over_capacity="allow")  # the write the guard would refuse, let in
    shrink = {"kind": "inventory", "provider": world["one"], "resource_class": "VCPU", "total": 4}
    box = sandbox(lenient, shrink)
    text = get(page, f"/sandboxes/{box}").text
    assert cells(text, "providers") == [
        [html.escape("<b>cn-1</b>"), "VCPU", "6", "6", "8", "4", " OVER CAPACITY"]
    ]
    assert '<tr class="over"' in text


@pytest.mark.parametrize("path", [f"/sandboxes/{uuidlib.UUID(int=404)}", "/sandboxes/not-a-uuid"])
def test_no_such_sandbox_is_a_404_page(page, path):
    answer = get(page, path)
    assert answer.status_code == 404 and "<h1>" in answer.text
