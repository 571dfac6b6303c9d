"""The lab's image catalog (Image API v2, read-only) under /image, beside compute."""

from __future__ import annotations

from tally.compute.images import IMAGES
from tally.compute.ops.servers import LAB_IMAGE

ADMIN = {"x-auth-token": "admin"}


def test_versions_as_glance_answers(lab):
    for path in ("/image/", "/image/v2"):
        answer = lab.http.get(path, headers=ADMIN)
        assert answer.status_code == 300
        current = answer.json()["versions"][0]
        assert current["status"] == "CURRENT" and current["id"].startswith("v2.")
        assert current["links"] == [{"rel": "self", "href": "http://lab.test/image/v2/"}]


def test_list_filter_page_and_show(lab):
    listed = lab.http.get("/image/v2/images", headers=ADMIN).json()
    assert [i["name"] for i in listed["images"]] == ["cirros", "fedora-41", "ubuntu-24.04"]
    assert (listed["first"], listed["schema"]) == ("/v2/images", "/v2/schemas/images")
    assert "next" not in listed
    cirros = lab.http.get("/image/v2/images", params={"name": "cirros"}, headers=ADMIN).json()
    assert [i["id"] for i in cirros["images"]] == [LAB_IMAGE]
    assert cirros["images"][0]["status"] == "active"
    first = lab.http.get("/image/v2/images", params={"limit": "2"}, headers=ADMIN).json()
    assert len(first["images"]) == 2
    assert first["next"] == f"/v2/images?limit=2&marker={first['images'][1]['id']}"
    rest = lab.http.get("/image" + first["next"], headers=ADMIN).json()
    assert [i["name"] for i in rest["images"]] == ["ubuntu-24.04"] and "next" not in rest
    shown = lab.http.get(f"/image/v2/images/{LAB_IMAGE}", headers=ADMIN).json()
    assert shown == IMAGES[LAB_IMAGE] and shown["self"] == f"/v2/images/{LAB_IMAGE}"


def test_unknown_image_and_no_token(lab):
    missing = lab.http.get("/image/v2/images/nope", headers=ADMIN)
    assert missing.status_code == 404
    assert missing.text.startswith("404 Not Found\n\nNo image found with ID nope")
    assert lab.http.get("/image/v2/images").status_code == 401


def test_a_server_booted_from_a_catalog_image_shows_it(cloud):
    fedora = next(i for i in IMAGES.values() if i["name"] == "fedora-41")
    server = cloud.boot(imageRef=fedora["id"])
    assert server["status"] == "ACTIVE" and server["image"]["id"] == fedora["id"]
    assert cloud.boot("plain")["image"]["id"] == LAB_IMAGE  # cirros, with no imageRef
