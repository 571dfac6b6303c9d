"""The operator page in a real headless browser (Debian's chromium, driven by selenium
through Debian's chromedriver of the same build) against a real `tally serve`: log in
with the form, filter, sort, open a provider, read its bars and compare their numbers
with the API's; screenshots are saved and checked.

Selenium rather than Playwright: with chromedriver from the same Debian build as
chromium the two always match, and selenium is a small pure-Python wheel; Playwright
drives browsers through its own Node.js driver (~40 MB) pinned to its own Chromium
build, which a system chromium may not match.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live import tally_serve

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
INSTALL = "apt-get install -y chromium chromium-driver (as root; bin/test does it)"
API = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def _browser_missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{path} is missing: {INSTALL}"
    return None


MISSING = _browser_missing()
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=MISSING or ""), pytest.mark.slow]


@pytest.fixture
def browser():
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is missing: pip install -e '.[test]'"
    )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="tally-chromium-")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,1100",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    # a form sent with Enter returns before the next page is in: lookups wait for it
    driver.implicitly_wait(10)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def api(http: httpx.Client, method: str, path: str, body: object = None) -> httpx.Response:
    result = http.request(method, path, headers=API, json=body)
    assert result.status_code < 300, result.text
    return result


def build_cloud(http: httpx.Client) -> dict[str, str]:
    """alpha: VCPU 6 of 8, memory 2048 of 4096 - 512 reserved; beta: VCPU 7 of
    4 x 2.0, trait CUSTOM_FAST; cn-<b>over</b>: VCPU 3 held, then shrunk to 2 (over)."""
    ids = {name: str(uuidlib.uuid4()) for name in ("alpha", "beta", "over")}
    names = {"alpha": "cn-alpha", "beta": "cn-beta", "over": "cn-<b>over</b>"}
    inventories = {
        "alpha": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096, "reserved": 512}},
        "beta": {"VCPU": {"total": 4, "allocation_ratio": 2.0}},
        "over": {"VCPU": {"total": 3}},
    }
    held = {"alpha": {"VCPU": 6, "MEMORY_MB": 2048}, "beta": {"VCPU": 7}, "over": {"VCPU": 3}}
    for key, rp in list(ids.items()):
        api(http, "POST", "/resource_providers", {"name": names[key], "uuid": rp})
        body = {"resource_provider_generation": 0, "inventories": inventories[key]}
        api(http, "PUT", f"/resource_providers/{rp}/inventories", body)
        ids[f"{key}-consumer"] = str(uuidlib.uuid4())
        claim = {
            "allocations": {rp: {"resources": held[key]}},
            "project_id": f"proj-{key}",
            "user_id": "user-1",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        api(http, "PUT", f"/allocations/{ids[f'{key}-consumer']}", claim)
    api(http, "PUT", "/traits/CUSTOM_FAST")
    api(
        http,
        "PUT",
        f"/resource_providers/{ids['beta']}/traits",
        {"traits": ["CUSTOM_FAST"], "resource_provider_generation": 2},
    )
    # over_capacity = allow lets the shrink through, as upstream Placement does
    shrink = {"resource_provider_generation": 2, "total": 2}
    api(http, "PUT", f"/resource_providers/{ids['over']}/inventories/VCPU", shrink)
    return ids


def api_numbers(http: httpx.Client, rp: str) -> dict[str, tuple[int, int, int]]:
    """{class: (used, reserved, capacity)} from GET .../inventories and .../usages."""
    inventories = api(http, "GET", f"/resource_providers/{rp}/inventories").json()
    used = api(http, "GET", f"/resource_providers/{rp}/usages").json()["usages"]
    return {
        rc: (used[rc], i["reserved"], int((i["total"] - i["reserved"]) * i["allocation_ratio"]))
        for rc, i in inventories["inventories"].items()
    }


def page_numbers(scope) -> dict[str, tuple[int, int, int]]:
    """{class: (used, reserved, capacity)} read off the bars' visible text."""
    from selenium.webdriver.common.by import By

    found = {}
    for amount in scope.find_elements(By.CSS_SELECTOR, ".amount"):
        rc = amount.get_attribute("data-rc")
        words = amount.find_element(By.CSS_SELECTOR, ".nums").text.split()
        # "used 6 / reserved 0 / capacity 8"
        assert words[0::3] == ["used", "reserved", "capacity"], words
        found[rc] = (int(words[1]), int(words[4]), int(words[7]))
    return found


def gone(element):
    """A wait condition: `element` left the document. Selenium's staleness_of, and
    also ChromeDriver's other word for it in the middle of a navigation ("Node with
    given id does not belong to the document"), which staleness_of lets through."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    def check(_driver) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    return check


@contextlib.contextmanager
def navigating(driver) -> Iterator[None]:
    """Around an action that loads a new page: wait until the old one is gone
    (a form sent with Enter returns before the next page is in)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")
    yield
    WebDriverWait(driver, 30).until(gone(old))
    # and the new one loaded whole: on a busy machine the next action could
    # otherwise reach into a document still being replaced
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def provider_rows(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "#providers tbody tr.provider")
    return [row.find_element(By.CSS_SELECTOR, "th a").text for row in rows]


def check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 800 and height >= 400, (width, height)
    assert len(data) > 20_000, len(data)  # text, tables and bars, not a blank page


def test_the_page_in_a_real_browser(tmp_path: Path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    with (
        tally_serve(tmp_path, lab="off", over_capacity="allow") as url,
        httpx.Client(base_url=url, trust_env=False, timeout=30) as http,
    ):
        ids = build_cloud(http)

        # no token: the login form; typed and sent with the keyboard
        browser.get(f"{url}/tally/ui/")
        assert "401" in browser.find_element(By.TAG_NAME, "h1").text
        field = browser.find_element(By.ID, "f-token")
        with navigating(browser):
            field.send_keys("admin", Keys.ENTER)
        assert browser.find_element(By.TAG_NAME, "h1").text == "Providers"
        assert provider_rows(browser) == ["cn-<b>over</b>", "cn-alpha", "cn-beta"]

        # the over-capacity row: a class for the colour, and the words
        over = browser.find_element(By.CSS_SELECTOR, f'tr[data-uuid="{ids["over"]}"]')
        assert "over" in over.get_attribute("class").split()
        assert "OVER CAPACITY" in over.text
        assert page_numbers(over) == api_numbers(http, ids["over"]) == {"VCPU": (3, 0, 2)}
        browser.save_screenshot(str(tmp_path / "providers.png"))

        # sort by fullness with the select, filter by name with the field
        Select(browser.find_element(By.ID, "f-sort")).select_by_value("fullness")
        with navigating(browser):
            browser.find_element(By.ID, "f-name").send_keys(Keys.ENTER)
        assert provider_rows(browser) == ["cn-<b>over</b>", "cn-beta", "cn-alpha"]
        name = browser.find_element(By.ID, "f-name")
        with navigating(browser):
            name.send_keys("ALPHA", Keys.ENTER)
        assert provider_rows(browser) == ["cn-alpha"]
        assert "name=ALPHA" in browser.current_url and "sort=fullness" in browser.current_url
        trait = browser.find_element(By.ID, "f-trait")
        name = browser.find_element(By.ID, "f-name")
        name.clear()
        with navigating(browser):
            trait.send_keys("CUSTOM_FAST", Keys.ENTER)
        assert provider_rows(browser) == ["cn-beta"]
        with navigating(browser):
            browser.find_element(By.LINK_TEXT, "Clear filters").click()
        assert len(provider_rows(browser)) == 3

        # the capacity box answers with `tally capacity`'s counts
        with navigating(browser):
            browser.find_element(By.ID, "f-shape").send_keys("VCPU:1", Keys.ENTER)
        result = browser.find_element(By.ID, "capacity-result")
        assert result.tag_name == "table"
        assert "cn-alpha" in result.text
        assert len(provider_rows(browser)) == 3

        # open a provider from its link; its bars are the API's numbers
        with navigating(browser):
            browser.find_element(By.LINK_TEXT, "cn-alpha").click()
        assert browser.find_element(By.TAG_NAME, "h1").text == "cn-alpha"
        assert browser.find_element(By.ID, "provider-uuid").text == ids["alpha"]
        inventory = browser.find_element(By.ID, "inventory")
        assert page_numbers(inventory) == api_numbers(http, ids["alpha"])
        assert page_numbers(inventory) == {"VCPU": (6, 0, 8), "MEMORY_MB": (2048, 512, 3584)}
        consumers = browser.find_element(By.ID, "consumers").text
        assert ids["alpha-consumer"] in consumers
        assert "INSTANCE" in consumers and "proj-alpha" in consumers
        history = browser.find_element(By.ID, "history").text  # the claim history
        assert ids["alpha-consumer"] in history and "allocation" in history
        shot = tmp_path / "provider.png"
        assert browser.save_screenshot(str(shot))
        check_png(shot)
        check_png(tmp_path / "providers.png")

        # keyboard: the first Tab stop is the skip link
        browser.get(f"{url}/tally/ui/")
        browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        assert browser.switch_to.active_element.text == "Skip to content"
    print(f"screenshots: {tmp_path / 'providers.png'}, {shot}")
