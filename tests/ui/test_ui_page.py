"""The operator page (tally.ui) without a browser: its HTML (escaping, filters, sort,
bars whose numbers are the API's, the over-capacity marker), who may read it (the
policy rule, the token cookie at the edge, the login form), and its two seams."""

from __future__ import annotations

import datetime as dt
import html
import logging
import re
import uuid as uuidlib
from pathlib import Path

import falcon.testing
import httpx
import pytest

from tally.config import Settings
from tally.db.transaction import transaction
from tally.serve.compose import create_server
from tally.serve.page import create_page, in_process_client
from tally.ui import seams, views
from tests.builders import allocate

ADMIN = {"x-auth-token": "admin"}
ROOT = "/tally/ui"


@pytest.fixture
def make_page(sqlite_engine):
    def make(**kwargs) -> falcon.testing.TestClient:
        seams_ = {k: kwargs.pop(k) for k in ("history", "capacity") if k in kwargs}
        return falcon.testing.TestClient(
            create_page(Settings.of(**kwargs), sqlite_engine, **seams_)
        )

    return make


@pytest.fixture
def page(make_page):
    return make_page()


def get(page, path="/", headers=ADMIN, **params):
    return page.simulate_get(path, root_path=ROOT, headers=headers, params=params or None)


def make_provider(client, name, inventories, parent=None) -> str:
    uuid = str(uuidlib.uuid4())
    body = {"name": name, "uuid": uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    assert client.simulate_post("/resource_providers", json=body).status_code == 200
    put = {"resource_provider_generation": 0, "inventories": inventories}
    if inventories:
        result = client.simulate_put(f"/resource_providers/{uuid}/inventories", json=put)
        assert result.status_code == 200, result.text
    return uuid


def claim(client, rp, resources, project="proj-a", consumer=None) -> str:
    consumer = consumer or str(uuidlib.uuid4())
    body = {
        "allocations": {rp: {"resources": resources}},
        "project_id": project,
        "user_id": "user-a",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    result = client.simulate_put(f"/allocations/{consumer}", json=body)
    assert result.status_code == 204, result.text
    return consumer


def row_uuids(text: str) -> list[str]:
    return re.findall(r'<tr class="provider[^"]*" data-uuid="([^"]+)"', text)


def bars(text: str) -> dict[str, tuple[int, int, int]]:
    found = re.findall(
        r'data-rc="([^"]+)">.*?data-used="(\d+)" data-reserved="(\d+)" data-capacity="(-?\d+)"',
        text,
    )
    return {rc: (int(u), int(r), int(c)) for rc, u, r, c in found}


def row_html(text: str, uuid: str) -> str:
    return re.search(rf'<tr class="provider[^"]*" data-uuid="{uuid}">.*?</tr>', text).group(0)


@pytest.fixture
def cloud(client):
    """alpha: VCPU 6/8, 2 GB of 4 GB (512 reserved); beta: VCPU 7 of 4 x 2.0,
    trait CUSTOM_FAST, both in one aggregate; gamma: no inventory."""
    alpha = make_provider(
        client, "cn-alpha", {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096, "reserved": 512}}
    )
    beta = make_provider(client, "CN-Beta", {"VCPU": {"total": 4, "allocation_ratio": 2.0}})
    gamma = make_provider(client, "gamma", {})
    consumer = claim(client, alpha, {"VCPU": 6, "MEMORY_MB": 2048})
    claim(client, beta, {"VCPU": 7}, project="proj-b")
    agg = str(uuidlib.uuid4())
    for rp in (alpha, beta):
        body = {"aggregates": [agg], "resource_provider_generation": 2}
        result = client.simulate_put(f"/resource_providers/{rp}/aggregates", json=body)
        assert result.status_code == 200, result.text
    client.simulate_put("/traits/CUSTOM_FAST")
    body = {"traits": ["CUSTOM_FAST"], "resource_provider_generation": 3}
    assert client.simulate_put(f"/resource_providers/{beta}/traits", json=body).status_code == 200
    return {"alpha": alpha, "beta": beta, "gamma": gamma, "agg": agg, "consumer": consumer}


# -- the list ----------------------------------------------------------------------------


def test_bars_show_the_apis_numbers(page, client, cloud):
    text = get(page).text
    for rp in (cloud["alpha"], cloud["beta"]):
        inventories = client.simulate_get(f"/resource_providers/{rp}/inventories").json
        used = client.simulate_get(f"/resource_providers/{rp}/usages").json["usages"]
        expected = {
            rc: (used[rc], i["reserved"], int((i["total"] - i["reserved"]) * i["allocation_ratio"]))
            for rc, i in inventories["inventories"].items()
        }
        assert bars(row_html(text, rp)) == expected
    assert "used 6 / reserved 0 / capacity 8" in row_html(text, cloud["alpha"])
    assert "used 2048 / reserved 512 / capacity 3584" in row_html(text, cloud["alpha"])
    assert "no inventory" in row_html(text, cloud["gamma"])


def test_numbers_and_filters_on_every_backend(api, engine):
    client = api()
    rp = make_provider(
        client, "cn-1", {"VCPU": {"total": 4, "reserved": 1, "allocation_ratio": 1.5}}
    )
    make_provider(client, "other", {"DISK_GB": {"total": 10}})
    claim(client, rp, {"VCPU": 3})
    page = falcon.testing.TestClient(create_page(Settings.of(), engine))
    text = get(page, name="CN").text
    assert row_uuids(text) == [rp]
    assert bars(text) == {"VCPU": (3, 1, 4)}  # int((4 - 1) * 1.5)
    assert bars(get(page, f"/providers/{rp}").text) == {"VCPU": (3, 1, 4)}


def test_sorted_by_name_unless_asked_by_fullness(page, cloud):
    assert row_uuids(get(page).text) == [cloud["alpha"], cloud["beta"], cloud["gamma"]]
    by_fullness = row_uuids(get(page, sort="fullness").text)
    assert by_fullness == [cloud["beta"], cloud["alpha"], cloud["gamma"]]  # 7/8, 6/8, none
    bogus = get(page, sort="bogus")  # a 400 naming it, not a silent sort by name
    assert bogus.status_code == 400
    assert "sort: 'bogus' is not one of name, fullness" in html.unescape(bogus.text)


def test_filters_by_name_aggregate_and_trait(page, cloud):
    assert row_uuids(get(page, name="BETA").text) == [cloud["beta"]]  # any case, a substring
    assert row_uuids(get(page, name="cn-").text) == [cloud["alpha"], cloud["beta"]]
    assert row_uuids(get(page, aggregate=cloud["agg"]).text) == [cloud["alpha"], cloud["beta"]]
    assert row_uuids(get(page, trait="CUSTOM_FAST").text) == [cloud["beta"]]
    both = get(page, trait="CUSTOM_FAST", name="alpha").text
    assert row_uuids(both) == []
    assert row_uuids(get(page, aggregate=str(uuidlib.uuid4())).text) == []
    assert row_uuids(get(page, name="alpha\n").text) == [cloud["alpha"]]  # spaces around: gone
    nul = get(page, name="al\x00pha")  # as the API: no NUL in a query value
    assert nul.status_code == 400 and "name: control characters are not allowed" in nul.text


def test_an_unknown_trait_is_said_above_an_empty_list(page, cloud):
    result = get(page, trait="CUSTOM_NOPE")
    text = result.text
    assert result.status_code == 400 and row_uuids(text) == []
    assert 'class="notice"' in text and "CUSTOM_NOPE" in text


def test_the_form_keeps_what_was_asked_and_sort_links_keep_the_filters(page, cloud):
    text = get(page, name="cn", sort="fullness").text
    assert 'name="name" value="cn"' in text
    assert '<option value="fullness" selected>' in text
    assert f'href="{ROOT}/?name=cn"' in text  # the Name header: sort by name, filters kept


def test_names_are_escaped_everywhere(page, client):
    name = """<script>alert("x")</script>&'"""
    rp = make_provider(client, name, {"VCPU": {"total": 1}})
    for text in (get(page).text, get(page, f"/providers/{rp}").text, get(page, name=name).text):
        assert "<script>" not in text
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;" in text  # Jinja2's
    assert 'value="&lt;script&gt;' in get(page, name=name).text  # echoed into the form


def test_over_capacity_is_red_and_said_in_words(page, client, sqlite_engine):
    rp = make_provider(client, "full", {"VCPU": {"total": 2}})
    with transaction(sqlite_engine, write=True) as conn:
        allocate(conn, rp, {"VCPU": 3})  # past the guard, as an upstream database may hold
    text = get(page).text
    row = row_html(text, rp)
    assert row.startswith('<tr class="provider over"')
    assert "OVER CAPACITY" in row and "OVER CAPACITY by 1" in row
    assert "1 provider, 1 OVER CAPACITY." in text
    assert "OVER CAPACITY" in get(page, f"/providers/{rp}").text


def test_the_page_is_html_without_script_and_never_cached(page, cloud):
    result = get(page)
    assert result.headers["content-type"].startswith("text/html")
    assert "<script" not in result.text
    assert "default-src 'none'" in result.headers["content-security-policy"]
    assert result.headers["cache-control"] == "no-store"
    assert '<a class="skip" href="#main">' in result.text
    assert '<label for="f-name">' in result.text


# -- a provider's page ---------------------------------------------------------------------


def test_a_providers_page_lists_inventory_consumers_and_history(page, client, cloud):
    text = get(page, f"/providers/{cloud['alpha']}").text
    assert bars(text) == {"MEMORY_MB": (2048, 512, 3584), "VCPU": (6, 0, 8)}
    consumers = re.search(r'<table id="consumers">.*?</table>', text).group(0)
    assert cloud["consumer"] in consumers
    assert "INSTANCE" in consumers and "proj-a" in consumers and "user-a" in consumers
    assert "MEMORY_MB 2048, VCPU 6" in consumers
    # from the claim history: since when, and which request wrote the claim
    assert re.search(r"<td class=uuid>req-[0-9a-f-]{36}</td></tr>", consumers)
    history = re.search(r'<table id="history">.*?</table>', text).group(0)
    assert cloud["consumer"] in history
    assert f'href="{ROOT}/?aggregate={cloud["agg"]}"' in text


def test_the_page_reads_through_the_api_under_its_request_id(page, cloud, caplog):
    """Every read is a Placement request, by the page's own user, whose global
    request id is the page's request id (one page view, followed in the log)."""
    caplog.set_level(logging.INFO, "tally.requestlog")
    for path in ("/", f"/providers/{cloud['alpha']}"):
        caplog.clear()
        result = get(page, path)
        lines = [r.getMessage() for r in caplog.records]
        page_id = result.headers["openstack-request-id"]
        reads = [line for line in lines if f"global_request_id: {page_id}" in line]
        assert reads and all("user: tally-ui project: tally-ui" in line for line in reads)
        assert len(reads) == len(lines) - 1  # all but the page's own line
    uris = [re.search(r'"GET (\S+)"', line).group(1) for line in reads]
    assert f"/resource_providers/{cloud['alpha']}/usages" in uris
    assert f"/tally/v1/history?provider={cloud['alpha']}&limit={views.HISTORY_LIMIT}" in uris


def test_an_unknown_provider_is_a_404_page(page):
    result = get(page, f"/providers/{uuidlib.uuid4()}")
    assert result.status_code == 404
    assert result.headers["content-type"].startswith("text/html")
    assert "No resource provider" in result.text
    assert get(page, "/nothing-here").status_code == 404


def allocation(time, consumer, rp, request, rc, before, after):
    return seams.HistoryEvent(time, "allocation", request, consumer, rp, rc, before, after)


def test_history_seam_gives_since_and_request(make_page, client, cloud):
    t0 = dt.datetime(2024, 5, 1, 12, 0, 0)
    consumer, rp = cloud["consumer"], cloud["alpha"]
    hour = dt.timedelta(hours=1)

    def history(placement, provider, limit):
        assert provider == rp and limit == views.HISTORY_LIMIT
        return [  # newest first: grown to 6 VCPU, first claimed at 13:00, released at 12:00
            allocation(t0 + 2 * hour, consumer, rp, "req-2", "VCPU", 2, 6),
            allocation(t0 + 1 * hour, consumer, rp, "req-1", "MEMORY_MB", None, 2048),
            allocation(t0 + 1 * hour, consumer, rp, "req-1", "VCPU", None, 2),
            allocation(t0, consumer, rp, "req-0", "VCPU", 1, None),
            seams.HistoryEvent(t0, "traits", "req-t", None, rp, detail={"added": ["<X>"]}),
        ]

    text = get(make_page(history=history), f"/providers/{rp}").text
    consumers = re.search(r'<table id="consumers">.*?</table>', text).group(0)
    assert "2024-05-01 13:00:00" in consumers and "req-1" in consumers
    table = re.search(r'<table id="history">.*?</table>', text).group(0)
    assert "VCPU 2 -&gt; 6" in table and "VCPU 1 -&gt; (none)" in table and "req-0" in table
    assert "&lt;X&gt;" in table and "<X>" not in table


def test_holding_since_undoes_the_consumers_rows_newest_first():
    t = dt.datetime(2024, 1, 1)
    ev = [
        allocation(t, "c", "p", "r3", "VCPU", 2, 4),
        allocation(t, "other", "p", "rx", "VCPU", None, 1),
        allocation(t, "c", "p", "r2", "DISK_GB", None, 10),
    ]
    # holds VCPU 4 and DISK_GB 10 now; the rows read never reach a time it held nothing
    assert seams.holding_since(ev, "c", {"VCPU": 4, "DISK_GB": 10}) == (ev[2], False)
    began = [*ev, allocation(t, "c", "p", "r1", "VCPU", None, 2)]
    assert seams.holding_since(began, "c", {"VCPU": 4, "DISK_GB": 10}) == (began[3], True)
    assert seams.holding_since(ev, "nobody", {"VCPU": 1}) is None


# -- the capacity box -----------------------------------------------------------------------


def test_capacity_box_says_not_available_without_a_fill_function(make_page, cloud):
    text = get(make_page(capacity=lambda placement, shape: None), shape="VCPU:2").text
    assert "Capacity counts not available" in text
    assert 'value="VCPU:2"' in text


def test_capacity_box_counts_as_tally_capacity(page, cloud):
    """alpha has 2 VCPU free (and 1536 MB), beta 1 VCPU (8 at ratio 2, 7 used)."""
    text = get(page, shape="VCPU:1").text
    table = re.search(r'<table id="capacity-result">.*?</table>', text, re.S).group(0)
    counts = dict(re.findall(r">(cn-alpha|CN-Beta)</a></th><td class=\"num\">(\d+)<", table))
    assert counts == {"cn-alpha": "2", "CN-Beta": "1"}
    text = get(page, shape="VCPU:1,MEMORY_MB:1024").text
    table = re.search(r'<table id="capacity-result">.*?</table>', text, re.S).group(0)
    assert re.search(r">cn-alpha</a></th><td class=\"num\">1</td><td>MEMORY_MB<", table)
    assert "CN-Beta" not in table  # no memory at all


def test_capacity_box_shows_the_seams_rows(make_page, cloud):
    asked = []

    def capacity(placement, shape):
        asked.append(dict(shape))
        resources = ",".join(f"{rc}:{n}" for rc, n in shape.items())
        answer = placement.get("/allocation_candidates", {"resources": resources})
        return [seams.Fit(rp, None, 1, ("VCPU",)) for rp in answer["provider_summaries"]]

    text = get(make_page(capacity=capacity), shape="VCPU:1, MEMORY_MB:512").text
    assert asked == [{"VCPU": 1, "MEMORY_MB": 512}]
    table = re.search(r'<table id="capacity-result">.*?</table>', text).group(0)
    assert cloud["alpha"] in table and cloud["beta"] not in table  # beta has no memory


def test_a_malformed_shape_is_explained(page):
    for shape in ("VCPU", "VCPU:0", "vcpu:2", "VCPU:1,VCPU:2"):
        result = get(page, shape=shape)
        assert result.status_code == 400 and "Cannot read the shape" in result.text, shape


def test_the_in_process_client_answers_as_the_api(client, sqlite_engine, cloud):
    for auth_strategy in ("noauth", "keystone"):
        get = in_process_client(Settings.of(auth_strategy=auth_strategy), sqlite_engine)
        assert get() is get()
        api = client.simulate_get("/allocation_candidates", params={"resources": "VCPU:1"}).json
        assert get().get("/allocation_candidates", {"resources": "VCPU:1"}) == api


# -- who may read it ------------------------------------------------------------------------


def test_admins_only_with_a_login_form_for_the_rest(page):
    missing = get(page, headers={})
    assert missing.status_code == 401
    assert f'action="{ROOT}/login"' in missing.text and "token admin is an admin" in missing.text
    reader = get(page, headers={"x-auth-token": "bob:proj", "x-roles": "reader"})
    assert reader.status_code == 403
    assert "tally:ui:view" in reader.text
    assert get(page).status_code == 200


def test_the_rule_is_a_policy_rule_an_operator_may_change(make_page, tmp_path: Path):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"tally:ui:view": "role:reader"\n')
    page = make_page(policy_file=str(policy_file))
    assert get(page, headers={"x-auth-token": "bob:proj", "x-roles": "reader"}).status_code == 200
    assert get(page).status_code == 403


def test_keystone_mode_reads_the_confirmed_identity(make_page):
    page = make_page(auth_strategy="keystone")
    confirmed = {"x-identity-status": "Confirmed", "x-user-id": "u", "x-project-id": "p"}
    assert get(page, headers={**confirmed, "x-roles": "admin"}).status_code == 200
    assert get(page, headers={**confirmed, "x-roles": "member"}).status_code == 403
    assert get(page, headers={"x-identity-status": "Invalid"}).status_code == 401
    assert "Keystone token" in get(page, headers={}).text


def test_login_sets_a_strict_cookie_and_goes_back_to_the_page(page):
    form = {"content-type": "application/x-www-form-urlencoded"}
    result = page.simulate_post(
        "/login", root_path=ROOT, headers=form, body=f"token=admin&next={ROOT}/%3Fsort%3Dfullness"
    )
    assert result.status_code == 303
    assert result.headers["location"] == f"{ROOT}/?sort=fullness"
    cookie = result.headers["set-cookie"]
    for part in ("tally_ui_token=admin", "HttpOnly", f"Path={ROOT}", "SameSite=Strict"):
        assert part in cookie
    elsewhere = page.simulate_post(
        "/login", root_path=ROOT, headers=form, body="token=admin&next=https://evil.example/"
    )
    assert elsewhere.headers["location"] == f"{ROOT}/"
    cross = page.simulate_post(
        "/login", root_path=ROOT, headers={**form, "sec-fetch-site": "cross-site"}, body="token=a"
    )
    assert cross.status_code == 403
    foreign = page.simulate_post(
        "/login",
        root_path=ROOT,
        headers={**form, "origin": "http://evil.example", "host": "tally.example"},
        body="token=a",
    )
    assert foreign.status_code == 403
    bad = page.simulate_post("/login", root_path=ROOT, headers=form, body="token=a%20b%3Bc")
    assert bad.status_code == 400
    out = page.simulate_post("/logout", root_path=ROOT)
    assert out.status_code == 303 and 'tally_ui_token="";' in out.headers["set-cookie"]


def test_the_cookie_is_a_token_for_the_page_only(sqlite_engine, tmp_path):
    settings = Settings.of(database_url=f"sqlite:///{tmp_path / 'tally.sqlite'}", lab="off")
    server = create_server(settings, sqlite_engine)
    with httpx.Client(transport=httpx.WSGITransport(app=server), base_url="http://t") as http:
        cookie = {"cookie": "tally_ui_token=admin"}
        assert http.get(f"{ROOT}/", headers=cookie).status_code == 200
        assert http.get(ROOT, headers=cookie).status_code == 200
        assert http.get("/resource_providers", headers=cookie).status_code == 401
        assert http.get("/placement/resource_providers", headers=cookie).status_code == 401
        assert http.get(f"{ROOT}/", headers={"cookie": "tally_ui_token=bob"}).status_code == 403
        assert http.get(f"{ROOT}/", headers={"cookie": "tally_ui_token=a b"}).status_code == 401


def test_lab_mode_checks_the_cookie_token_with_the_lab_identity(tmp_path):
    settings = Settings.of(data_dir=str(tmp_path), auth_strategy="lab", lab="on")
    from tally.db.engine import make_engine
    from tally.placement.ledger.bootstrap import prepare_database

    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    prepare_database(engine)
    server = create_server(settings, engine)
    with httpx.Client(transport=httpx.WSGITransport(app=server), base_url="http://t") as http:
        auth = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {"name": "admin", "password": "admin", "domain": {"id": "default"}}
                    },
                },
                "scope": {"project": {"name": "admin", "domain": {"id": "default"}}},
            }
        }
        issued = http.post("/identity/v3/auth/tokens", json=auth)
        assert issued.status_code == 201, issued.text
        token = issued.headers["x-subject-token"]
        lab_cookie = {"cookie": f"tally_ui_token={token}"}
        assert http.get(f"{ROOT}/", headers=lab_cookie).status_code == 200
        assert http.get(f"{ROOT}/", headers={"cookie": "tally_ui_token=admin"}).status_code == 401
    engine.dispose()


def test_failed_searches_are_listed_with_why(page, client, cloud):
    assert "No search has found nothing." in get(page, "/failures").text
    make_provider(client, "<b>odd</b>", {"VCPU": {"total": 2}})
    nova_id = f"req-{uuidlib.uuid4()}"
    asked = client.simulate_get(
        "/allocation_candidates",
        query_string="resources=VCPU:3",
        headers={"x-openstack-request-id": nova_id, "openstack-api-version": "placement 1.39"},
    )
    assert asked.json["allocation_requests"] == []
    deadline = dt.datetime.now() + dt.timedelta(seconds=10)  # written off the request's path
    while not client.simulate_get("/tally/v1/failures").json["failures"]:
        assert dt.datetime.now() < deadline
    text = get(page, "/failures").text
    assert nova_id in text and "resources=VCPU:3" in text
    assert html.escape("<b>odd</b>") in text and "<b>odd</b>" not in text
    assert "resources=VCPU:3: 2 free at most" in text  # the closest miss
    assert f'href="{ROOT}/failures"' in get(page).text  # linked from every page
