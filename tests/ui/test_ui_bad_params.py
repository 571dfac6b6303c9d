"""Every GET parameter of the page, fed the hostile values the API tests use
(tests/api/test_input_domain.py): the page answers its own 400 page naming what it
cannot use, or 200 where the value is fine, never a 5xx (issue 29, item 5:
`?shape=NOPE:1` was a 500, an uncaught Placement refusal).

    cn-1 (VCPU 4), trait CUSTOM_FAST, in aggregate AGG
"""

from __future__ import annotations

import html
import re
import uuid as uuidlib

import falcon.testing
import pytest

from tally.config import Settings
from tally.serve.page import create_page

ADMIN = {"x-auth-token": "admin"}
AGG = "5fdddb47-0146-464c-8977-18c9ddd0a1ac"
HOSTILE = [
    "",
    "NOPE:1",  # an unknown resource class
    "VCPU:-1",
    "VCPU:0",
    f"VCPU:{2**31}",
    f"VCPU:{2**63}",
    f"VCPU:{2**64 + 1}",
    "VCPU:abc",
    "VCPU:1.5",
    "vcpu:1",
    "VCPÜ:1",  # unicode
    "名前",
    "\U0001f600",
    "A" * 5000,  # very long
    "VCPU:1," * 1000,
    "not-a-uuid",
    "12345678-1234-1234-1234-12345678901",  # a digit short
    "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
    "in:a,b",
    "!CUSTOM_FAST",
    "'\"><script>",
    "al\x00pha",  # NUL
    "VCPU\t:1",
]
# per parameter, the hostile values that are fine (200); every other one is a 400
FINE = {
    "name": {v for v in HOSTILE if len(v) <= 255 and "\x00" not in v and "\t" not in v},
    "aggregate": {""},
    "trait": {""},
    "sort": {""},
    "shape": {"", f"VCPU:{2**31}", f"VCPU:{2**63}", f"VCPU:{2**64 + 1}"},  # nothing fits
}
LEGIT = {  # and values each parameter takes, with what they do
    "aggregate": [AGG, AGG.upper(), "{" + AGG + "}", str(uuidlib.uuid4())],
    "trait": ["CUSTOM_FAST"],
    "sort": ["name", "fullness"],
    "shape": ["VCPU:1", "VCPU=1", " VCPU = 2 , MEMORY_MB:1 "],
    "name": ["cn", "CN-1"],
}


@pytest.fixture
def page(sqlite_engine, client) -> falcon.testing.TestClient:
    rp = client.simulate_post("/resource_providers", json={"name": "cn-1"}).json["uuid"]
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    result = client.simulate_put(f"/resource_providers/{rp}/inventories", json=inventory)
    assert result.status_code == 200, result.text
    client.simulate_put("/traits/CUSTOM_FAST")
    traits = {"traits": ["CUSTOM_FAST"], "resource_provider_generation": 1}
    assert client.simulate_put(f"/resource_providers/{rp}/traits", json=traits).status_code == 200
    aggregates = {"aggregates": [AGG], "resource_provider_generation": 2}
    result = client.simulate_put(f"/resource_providers/{rp}/aggregates", json=aggregates)
    assert result.status_code == 200, result.text
    return falcon.testing.TestClient(create_page(Settings.of(), sqlite_engine))


def get(page: falcon.testing.TestClient, **params: str) -> falcon.testing.Result:
    return page.simulate_get("/", root_path="/tally/ui", headers=ADMIN, params=params)


def notice(result: falcon.testing.Result) -> str:
    """The page's words about what it could not use (the list's or the shape box's)."""
    found = re.findall(r'<p class="notice" role="status"[^>]*>(.*?)</p>', result.text, re.S)
    return html.unescape(" ".join(found))


@pytest.mark.parametrize("value", HOSTILE, ids=[repr(v)[:24] for v in HOSTILE])
@pytest.mark.parametrize("param", sorted(FINE))
def test_each_parameter_is_a_400_page_or_fine_never_a_5xx(page, param, value):
    result = get(page, **{param: value})
    expected = 200 if value in FINE[param] else 400
    assert result.status_code == expected, (param, value, notice(result) or result.text[-300:])
    assert result.headers["content-type"].startswith("text/html")
    assert "<h1>Providers</h1>" in result.text  # its own page, the form to correct it in
    if expected == 400:
        said = notice(result)
        assert said.startswith(("Cannot list providers: ", "Cannot read the shape: ",
                                "Cannot count the shape: ", "No such trait")), said  # fmt: skip
        if said.startswith("Cannot list providers: "):
            assert f"{param}: " in said  # names the parameter


@pytest.mark.parametrize("param", sorted(LEGIT))
def test_legitimate_values_are_200(page, param):
    for value in LEGIT[param]:
        result = get(page, **{param: value})
        assert result.status_code == 200, (param, value, notice(result))
        listed = re.findall(r'<tr class="provider[^"]*" data-uuid="([^"]+)"', result.text)
        assert len(listed) == (0 if value == LEGIT["aggregate"][-1] else 1), (param, value)


def test_an_unknown_class_in_the_shape_is_a_400_naming_it(page):
    result = get(page, shape="NOPE:1")
    assert result.status_code == 400
    assert notice(result) == (
        "Cannot count the shape: Invalid resource class in resources parameter: "
        "No such resource class NOPE."
    )
    assert 'value="NOPE:1"' in result.text  # kept in the box, to be corrected


@pytest.mark.parametrize(
    "query", ["name=%ff", "shape=VCPU%3A1%ff", "trait=%ED%A0%80", "%ff=1", "sort=%00"]
)
def test_a_query_string_that_is_not_utf8_is_a_400(page, query):
    result = page.simulate_get("/", root_path="/tally/ui", headers=ADMIN, query_string=query)
    assert result.status_code == 400 and "<h1>Providers</h1>" in result.text
    assert "Cannot list providers: " in notice(result)


def test_the_last_of_a_repeated_parameter_counts(page):
    query = "sort=fullness&sort=bogus"
    result = page.simulate_get("/", root_path="/tally/ui", headers=ADMIN, query_string=query)
    assert result.status_code == 400 and "sort: 'bogus'" in notice(result)
