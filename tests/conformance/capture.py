"""capture.py OUT.jsonl - `tally serve`, with every GET /allocation_candidates it
answers written to OUT.jsonl (one JSON line each) together with the whole
Placement state it was asked over, as the API shows it.

A test harness only (tests/conformance/serve runs it instead of `tally serve` when
TALLY_CAPTURE_CANDIDATES names a file; tests/api/why_corpus/build.py reads the
lines): the product has no such hook. The state is read through the server's own
API, in-process, before the request itself runs:

  {"microversion": "1.25", "query": "resources=VCPU:1", "status": 200,
   "status_newest": 200, "state": {"providers": [[uuid, name, parent], ...],
   "inventories": {uuid: {class: {total, reserved, ...}}}, "traits": {uuid: [...]},
   "aggregates": {uuid: [...]}, "consumers": {consumer: {uuid: {class: n}}},
   "classes": [custom class, ...], "custom_traits": [...]}}

`status_newest`: the same query asked at microversion 1.39 (how
/tally/v1/allocation_candidates/why reads it).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from tally.placement.microversion import MAX_VERSION

NEWEST = ".".join(map(str, MAX_VERSION))
WSGIApp = Callable[[dict[str, Any], Callable], Iterable[bytes]]


def read_state(api: httpx.Client) -> dict[str, Any]:
    """Every provider (parents before children), inventory, trait, aggregate and
    allocation, and the custom classes and traits."""
    listed = api.get("/resource_providers").json()["resource_providers"]
    parent = {p["uuid"]: p["parent_provider_uuid"] for p in listed}

    def depth(uuid: str) -> int:
        return 0 if parent[uuid] is None else 1 + depth(parent[uuid])

    listed.sort(key=lambda p: (depth(p["uuid"]), p["name"]))
    state: dict[str, Any] = {
        "providers": [[p["uuid"], p["name"], p["parent_provider_uuid"]] for p in listed],
        "inventories": {},
        "traits": {},
        "aggregates": {},
        "consumers": {},
    }
    for p in listed:
        path = f"/resource_providers/{p['uuid']}"
        state["inventories"][p["uuid"]] = {
            rc: {k: v for k, v in inv.items() if k != "resource_provider_generation"}
            for rc, inv in api.get(f"{path}/inventories").json()["inventories"].items()
        }
        state["traits"][p["uuid"]] = sorted(api.get(f"{path}/traits").json()["traits"])
        state["aggregates"][p["uuid"]] = sorted(api.get(f"{path}/aggregates").json()["aggregates"])
        held = api.get(f"{path}/allocations").json()["allocations"]
        for consumer, alloc in held.items():
            state["consumers"].setdefault(consumer, {})[p["uuid"]] = alloc["resources"]
    classes = api.get("/resource_classes").json()["resource_classes"]
    state["classes"] = sorted(c["name"] for c in classes if c["name"].startswith("CUSTOM_"))
    traits = api.get("/traits", params={"name": "startswith:CUSTOM_"}).json()["traits"]
    state["custom_traits"] = sorted(traits)
    return state


class Capture:
    """WSGI middleware: GET /allocation_candidates answered as ever, and written down."""

    def __init__(self, app: WSGIApp, out: str) -> None:
        self.app, self.out, self.lock = app, out, threading.Lock()
        self.lab = getattr(app, "lab", None)  # (what `tally serve` starts its ticker for)
        self.api = httpx.Client(  # as the upstream fixtures' admin (noauth)
            transport=httpx.WSGITransport(app=app),
            base_url="http://placement",
            headers={"x-auth-token": "admin", "openstack-api-version": f"placement {NEWEST}"},
        )

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "").removeprefix("/placement")
        if environ["REQUEST_METHOD"] != "GET" or path != "/allocation_candidates":
            return self.app(environ, start_response)
        query = environ.get("QUERY_STRING", "")
        with self.lock:  # (one request at a time: the state is the one it is asked over)
            state = read_state(self.api)
            seen: dict[str, Any] = {}

            def starting(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                seen["status"] = int(status.split()[0])
                seen["version"] = dict((k.lower(), v) for k, v in headers).get(
                    "openstack-api-version", ""
                )
                return start_response(status, headers, *exc)

            body = b"".join(self.app(environ, starting))
            newest = self.api.get(f"/allocation_candidates?{query}").status_code
            line = {
                "microversion": seen["version"].removeprefix("placement "),
                "query": query,
                "status": seen["status"],
                "status_newest": newest,
                "state": state,
            }
            with open(self.out, "a") as f:
                f.write(json.dumps(line, sort_keys=True) + "\n")
        return [body]


def main() -> None:
    from tally.cli.main import cli
    from tally.serve import compose

    out = sys.argv[1]
    made = compose.create_server
    compose.create_server = lambda *a, **kw: Capture(made(*a, **kw), out)  # type: ignore[assignment]
    cli(["serve"])


if __name__ == "__main__":
    main()
