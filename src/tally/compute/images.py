"""The lab's image catalog: a read-only Image API v2 (Glance) subset, mounted beside
the compute API under /image by tally.serve.compose, so that clients that resolve an
image by name before they boot (`openstack server create --image cirros`) work
against the lab as against a real cloud. A few public images, active, never written:
GET / (versions), /v2/images (`name`, `status`, `visibility` filters; limit/marker
paging with Glance's `next`) and /v2/images/{image_id}.

The compute API keeps taking any imageRef, as it did before this catalog (a server
records the id it was given); `cirros` is the image a server booted without one gets
(tally.compute.ops.servers.LAB_IMAGE)."""

from __future__ import annotations

import datetime as dt
import hashlib
import urllib.parse
from collections.abc import Mapping
from typing import Any

import falcon

from tally.compute import middleware
from tally.compute.errors import BadRequest, ComputeFault, NotFound
from tally.compute.handlers.common import integer
from tally.compute.ops.servers import LAB_IMAGE
from tally.config import Settings

CREATED = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
OWNER = "lab"  # the project that owns the lab's public images
# (id, name, disk_format, size in bytes, min_disk GB, min_ram MB)
CATALOG = (
    (LAB_IMAGE, "cirros", "qcow2", 21_430_272, 0, 0),
    ("00000000-0000-4000-8000-00000000a1b1", "ubuntu-24.04", "qcow2", 616_562_688, 4, 512),
    ("00000000-0000-4000-8000-00000000a1b2", "fedora-41", "qcow2", 491_716_608, 5, 1024),
)
VERSIONS = ("2.17", "2.16", "2.15")  # Glance's v2 minor versions the lab claims, newest first
MAX_LIMIT = 1000  # Glance's api_limit_max


def image(row: tuple) -> dict[str, Any]:
    """An image as Glance v2 shows it (its links are paths from the API's root)."""
    uuid, name, disk_format, size, min_disk, min_ram = row
    stamp = CREATED.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "id": uuid,
        "name": name,
        "status": "active",
        "visibility": "public",
        "protected": True,
        "os_hidden": False,
        "owner": OWNER,
        "container_format": "bare",
        "disk_format": disk_format,
        "size": size,
        "virtual_size": size * 4,
        "min_disk": min_disk,
        "min_ram": min_ram,
        "checksum": hashlib.md5(uuid.encode()).hexdigest(),  # of no real bytes: a stand-in
        "os_hash_algo": "sha512",
        "os_hash_value": hashlib.sha512(uuid.encode()).hexdigest(),
        "tags": [],
        "created_at": stamp,
        "updated_at": stamp,
        "self": f"/v2/images/{uuid}",
        "file": f"/v2/images/{uuid}/file",
        "schema": "/v2/schemas/image",
    }


IMAGES = {row[0]: image(row) for row in CATALOG}


def _versions(req: falcon.Request) -> dict[str, Any]:
    href = f"{req.forwarded_scheme}://{req.forwarded_host}{req.root_path}/v2/"
    return {
        "versions": [
            {
                "id": f"v{v}",
                "status": "CURRENT" if i == 0 else "SUPPORTED",
                "links": [{"rel": "self", "href": href}],
            }
            for i, v in enumerate(VERSIONS)
        ]
    }


class Versions:
    """GET / and GET /v2: the versions, 300 Multiple Choices as Glance answers."""

    OPEN = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_300
        resp.media = _versions(req)


def _matches(found: Mapping[str, Any], req: falcon.Request) -> bool:
    for key in ("name", "status", "visibility", "owner", "disk_format", "container_format"):
        wanted = req.get_param(key)
        if wanted is not None and found[key] != wanted:
            return False
    return True


class Images:
    """GET /v2/images: the images a filter keeps, by name then id, a page at a time."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = sorted((i for i in IMAGES.values() if _matches(i, req)), key=_order)
        marker, limit = req.get_param("marker"), integer(req, "limit")
        if marker:
            if marker not in IMAGES:
                raise BadRequest(f"marker {marker} could not be found.")
            found = [i for i in found if _order(i) > _order(IMAGES[marker])]
        limit = min(MAX_LIMIT if limit is None else limit, MAX_LIMIT)
        page = found[:limit]
        resp.media = {"images": page, "first": "/v2/images", "schema": "/v2/schemas/images"}
        if len(found) > limit and page:
            query = urllib.parse.urlencode({**req.params, "marker": page[-1]["id"]})
            resp.media["next"] = f"/v2/images?{query}"


def _order(found: Mapping[str, Any]) -> tuple[str, str]:
    return found["name"], found["id"]


class Image:
    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        if image_id not in IMAGES:
            raise NotFound(f"No image found with ID {image_id}")
        resp.media = IMAGES[image_id]


ROUTES = (
    ("/", Versions),
    ("/v2", Versions),
    ("/v2/images", Images),
    ("/v2/images/{image_id}", Image),
)


def create_app(settings: Settings) -> falcon.App:
    """The image API: who asks is checked as by the compute API (a token in noauth,
    else the identity headers auth_token or the lab's token filter confirmed)."""
    app = falcon.App(
        middleware=[
            middleware.RequestIdAndLog(),
            middleware.Auth(noauth=settings.auth_strategy == "noauth"),
        ],
        cors_enable=False,
    )
    app.req_options.strip_url_path_trailing_slash = True
    for path, resource in ROUTES:
        app.add_route(path, resource())
    app.add_error_handler(ComputeFault, _error)
    return app


def _error(req: falcon.Request, resp: falcon.Response, exc: ComputeFault, params) -> None:
    """Glance's error body: plain text, the status line then the explanation."""
    title = falcon.code_to_http_status(exc.status)
    resp.status = title
    resp.content_type = falcon.MEDIA_TEXT
    resp.text = f"{title}\n\n{exc.message}\n\n   "
