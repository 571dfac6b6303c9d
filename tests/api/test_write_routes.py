"""Every write route of the route table, walked in one story: each write is seen by
the candidates index of another worker (an `Index` that only ever catches up through
the journal equals one loaded fresh after every step), and a write the database
aborts to resolve a race (a deadlock, a serialization failure, a Galera certification
failure) is run again by the server: the client never sees it."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from tally.db.transaction import transaction
from tally.placement import app as placement_app
from tests.api.index_state import books as _books
from tests.api.index_state import fresh as _fresh

WRITES = ("PUT", "POST", "DELETE", "PATCH")
RP, CHILD, SHARED = (str(uuidlib.UUID(int=i)) for i in (101, 102, 103))
AGG = str(uuidlib.UUID(int=201))
SERVER, MOVE = str(uuidlib.UUID(int=301)), str(uuidlib.UUID(int=302))


def _generation(client, uuid: str) -> int:
    return client.simulate_get(f"/resource_providers/{uuid}").json["generation"]


def _claim(rp: str, vcpu: int, generation: int | None = None) -> dict:
    return {
        "allocations": {rp: {"resources": {"VCPU": vcpu}}},
        "consumer_generation": generation,
        "project_id": "p",
        "user_id": "u",
        "consumer_type": "INSTANCE",
    }


def _consumer_generation(client, consumer: str) -> int | None:
    return client.simulate_get(f"/allocations/{consumer}").json.get("consumer_generation")


def _inventory(client, rp: str, inventories: dict) -> dict:
    return {"resource_provider_generation": _generation(client, rp), "inventories": inventories}


SANDBOX: dict[str, str] = {}  # the path of the sandbox the story made last


def _sandbox(client):  # noqa: ANN001, ANN202
    resp = client.simulate_post("/tally/v1/sandboxes", json={})
    SANDBOX["path"] = f"/tally/v1/sandboxes/{resp.json['id']}"
    return resp


# (method, route template, request): each request(client, old_client) -> response;
# in order, one story that leaves the books consistent after every step.
Step = tuple[str, str, Callable]
STORY: list[Step] = [
    ("POST", "/resource_providers", lambda c, _: c.simulate_post(
        "/resource_providers", json={"name": "cn", "uuid": RP})),
    ("POST", "/resource_providers", lambda c, _: c.simulate_post(
        "/resource_providers", json={"name": "numa", "uuid": CHILD, "parent_provider_uuid": RP})),
    ("PUT", "/resource_providers/{uuid}", lambda c, _: c.simulate_put(
        f"/resource_providers/{CHILD}", json={"name": "numa0", "parent_provider_uuid": RP})),
    ("PUT", "/resource_providers/{uuid}/inventories", lambda c, _: c.simulate_put(
        f"/resource_providers/{RP}/inventories",
        json=_inventory(c, RP, {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}))),
    ("POST", "/resource_providers/{uuid}/inventories", lambda c, _: c.simulate_post(
        f"/resource_providers/{CHILD}/inventories",
        json={"resource_provider_generation": _generation(c, CHILD), "resource_class": "VCPU",
              "total": 4})),
    ("PUT", "/resource_providers/{uuid}/inventories/{resource_class}", lambda c, _: c.simulate_put(
        f"/resource_providers/{RP}/inventories/VCPU",
        json={"resource_provider_generation": _generation(c, RP), "total": 16})),
    ("POST", "/resource_classes", lambda c, _: c.simulate_post(
        "/resource_classes", json={"name": "CUSTOM_OLD"})),
    ("PUT", "/resource_classes/{name}", lambda _, old: old.simulate_put(
        "/resource_classes/CUSTOM_OLD", json={"name": "CUSTOM_GPU"})),
    ("PUT", "/resource_classes/{name}", lambda c, _: c.simulate_put(
        "/resource_classes/CUSTOM_GONE")),
    ("DELETE", "/resource_classes/{name}", lambda c, _: c.simulate_delete(
        "/resource_classes/CUSTOM_GONE")),
    ("POST", "/resource_providers/{uuid}/inventories", lambda c, _: c.simulate_post(
        f"/resource_providers/{CHILD}/inventories",
        json={"resource_provider_generation": _generation(c, CHILD),
              "resource_class": "CUSTOM_GPU", "total": 2})),
    ("DELETE", "/resource_providers/{uuid}/inventories/{resource_class}",
     lambda c, _: c.simulate_delete(f"/resource_providers/{CHILD}/inventories/CUSTOM_GPU")),
    ("PUT", "/traits/{name}", lambda c, _: c.simulate_put("/traits/CUSTOM_FAST")),
    ("PUT", "/resource_providers/{uuid}/traits", lambda c, _: c.simulate_put(
        f"/resource_providers/{RP}/traits",
        json={"resource_provider_generation": _generation(c, RP), "traits": ["CUSTOM_FAST"]})),
    ("DELETE", "/resource_providers/{uuid}/traits", lambda c, _: c.simulate_delete(
        f"/resource_providers/{RP}/traits")),
    ("DELETE", "/traits/{name}", lambda c, _: c.simulate_delete("/traits/CUSTOM_FAST")),
    ("PUT", "/resource_providers/{uuid}/aggregates", lambda c, _: c.simulate_put(
        f"/resource_providers/{RP}/aggregates",
        json={"resource_provider_generation": _generation(c, RP), "aggregates": [AGG]})),
    ("PUT", "/allocations/{consumer_uuid}", lambda c, _: c.simulate_put(
        f"/allocations/{SERVER}", json=_claim(RP, 2))),
    ("POST", "/allocations", lambda c, _: c.simulate_post("/allocations", json={
        SERVER: _claim(RP, 3, _consumer_generation(c, SERVER)),
        MOVE: _claim(CHILD, 1)})),
    ("POST", "/reshaper", lambda c, _: c.simulate_post("/reshaper", json={
        "inventories": {
            RP: _inventory(c, RP, {"MEMORY_MB": {"total": 4096}}),
            CHILD: _inventory(c, CHILD, {"VCPU": {"total": 20}}),
        },
        "allocations": {
            SERVER: _claim(CHILD, 3, _consumer_generation(c, SERVER)),
            MOVE: _claim(CHILD, 1, _consumer_generation(c, MOVE)),
        }})),
    # what if: a sandbox's own writes (the sandbox table), and its commit (the ledger's)
    ("POST", "/tally/v1/sandboxes", lambda c, _: _sandbox(c)),
    ("POST", "/tally/v1/sandboxes/{sandbox}/changes", lambda c, _: c.simulate_post(
        f"{SANDBOX['path']}/changes", json={"changes": [
            {"kind": "inventory", "provider": RP, "resource_class": "MEMORY_MB", "total": 8192},
            {"kind": "resize", "consumer": SERVER, "resources": {"VCPU": 3}},
            {"kind": "disable", "provider": RP}]})),
    ("POST", "/tally/v1/sandboxes/{sandbox}/commit", lambda c, _: c.simulate_post(
        f"{SANDBOX['path']}/commit")),
    ("POST", "/tally/v1/sandboxes", lambda c, _: _sandbox(c)),
    ("DELETE", "/tally/v1/sandboxes/{sandbox}", lambda c, _: c.simulate_delete(
        SANDBOX["path"])),
    ("DELETE", "/allocations/{consumer_uuid}", lambda c, _: c.simulate_delete(
        f"/allocations/{MOVE}")),
    ("DELETE", "/resource_providers/{uuid}/inventories", lambda c, _: c.simulate_delete(
        f"/resource_providers/{RP}/inventories")),
    ("POST", "/resource_providers", lambda c, _: c.simulate_post(
        "/resource_providers", json={"name": "shared", "uuid": SHARED})),
    ("DELETE", "/resource_providers/{uuid}", lambda c, _: c.simulate_delete(
        f"/resource_providers/{SHARED}")),
]  # fmt: skip


def _write_routes() -> set[tuple[str, str]]:
    """(method, path) of every write the route table answers."""
    found = set()
    for path, resource in placement_app.ROUTES:
        for method in WRITES:
            for suffix in ("", "_item"):
                if hasattr(resource, f"on_{method.lower()}{suffix}"):
                    found.add((method, path))
    return found


def test_the_story_walks_every_write_route():
    assert {(method, path) for method, path, _ in STORY} == _write_routes()


@pytest.fixture
def clients(api):
    return api("1.39"), api("1.6")


def test_another_workers_index_sees_every_write(engine, clients):
    client, old = clients
    other = _fresh(engine)  # loaded before the story: from now on it only catches up
    for method, path, request in STORY:
        resp = request(client, old)
        assert resp.status_code < 300, (method, path, resp.status_code, resp.text)
        with other.held(engine):
            pass
        assert _books(other) == _books(_fresh(engine)), (method, path)


# Providers deleted and created again (a compute service deleted and started
# again keeps its provider's uuid), each sequence seen by another worker step by
# step and all at once (the delete and the create in one catch-up).
ROOT, NODE, PEER, OTHER = (str(uuidlib.UUID(int=i)) for i in (401, 402, 403, 404))


def _made(uuid: str, name: str, parent: str | None, vcpu: int = 4) -> Callable:
    def request(c, _):  # noqa: ANN001, ANN202
        body = {"name": name, "uuid": uuid, "parent_provider_uuid": parent}
        resp = c.simulate_post("/resource_providers", json=body)
        if resp.status_code >= 300:
            return resp
        return c.simulate_put(
            f"/resource_providers/{uuid}/inventories",
            json=_inventory(c, uuid, {"VCPU": {"total": vcpu}}),
        )

    return request


def _gone(uuid: str) -> Callable:
    return lambda c, _: c.simulate_delete(f"/resource_providers/{uuid}")


def _moved(uuid: str, name: str, parent: str | None) -> Callable:
    return lambda c, _: c.simulate_put(
        f"/resource_providers/{uuid}", json={"name": name, "parent_provider_uuid": parent}
    )


def _shared(uuid: str) -> Callable:
    """The provider shares through AGG (and so reaches every tree in it)."""

    def request(c, _):  # noqa: ANN001, ANN202
        gen = _generation(c, uuid)
        body = {"resource_provider_generation": gen, "traits": ["MISC_SHARES_VIA_AGGREGATE"]}
        c.simulate_put(f"/resource_providers/{uuid}/traits", json=body)
        body = {"resource_provider_generation": gen + 1, "aggregates": [AGG]}
        return c.simulate_put(f"/resource_providers/{uuid}/aggregates", json=body)

    return request


MADE_AGAIN: list[list[tuple[str, Callable]]] = [
    [("root", _made(ROOT, "root", None)), ("node", _made(NODE, "node", ROOT)),
     ("peer", _made(PEER, "peer", ROOT))],
    # the same uuid, the same parent, the same inventory
    [("delete node", _gone(NODE)), ("node again", _made(NODE, "node", ROOT))],
    # deleted again: its id (the newest) may be handed to the next provider
    [("delete node", _gone(NODE)), ("other", _made(OTHER, "other", ROOT)),
     ("node again", _made(NODE, "node", ROOT, vcpu=8))],
    # the same name on another uuid, and the old uuid with another name
    [("delete other", _gone(OTHER)), ("its name", _made(PEER[:-1] + "9", "other", ROOT)),
     ("delete it", _gone(PEER[:-1] + "9")), ("other again", _made(OTHER, "renamed", ROOT))],
    # a re-parent in between: made again under another parent, then as a root
    [("delete node", _gone(NODE)), ("peer moves", _moved(PEER, "peer", OTHER)),
     ("node under peer", _made(NODE, "node", PEER)), ("delete node", _gone(NODE)),
     ("node a root", _made(NODE, "node", None)), ("peer back", _moved(PEER, "peer", ROOT))],
    # a root made again as a child, a sharing provider made again in another tree
    [("share", _shared(NODE)), ("delete node", _gone(NODE)),
     ("node a child", _made(NODE, "node", OTHER)), ("share", _shared(NODE)),
     ("delete node", _gone(NODE)), ("delete other", _gone(OTHER)),
     ("other again", _made(OTHER, "other", PEER)), ("node again", _made(NODE, "node", None))],
]  # fmt: skip


def test_another_workers_index_sees_a_provider_made_again(engine, clients):
    """Each step and each whole sequence caught up leave the index equal to one
    loaded fresh: a provider is its row, not its uuid."""
    client, old = clients
    stepwise, at_once = _fresh(engine), _fresh(engine)
    for sequence in MADE_AGAIN:
        for label, request in sequence:
            resp = request(client, old)
            assert resp.status_code < 300, (label, resp.status_code, resp.text)
            with stepwise.held(engine):
                pass
            assert _books(stepwise) == _books(_fresh(engine)), label
        with at_once.held(engine):
            pass
        assert _books(at_once) == _books(_fresh(engine)), [label for label, _ in sequence]


@pytest.fixture
def one_abort(engine: sa.Engine) -> Iterator[dict]:
    """Armed, the next write statement fails as a database that aborted the
    transaction to resolve a race (SQLSTATE 40001) once."""
    state = {"armed": False, "fired": 0}

    class Aborted(Exception):
        sqlstate = "40001"

    def abort(conn, _cursor, statement, _params, context, _many) -> None:  # noqa: ANN001
        verb = statement.lstrip()[:6].upper()  # (PostgreSQL's last writes go as text)
        writes = context.isinsert or context.isupdate or context.isdelete
        if state["armed"] and (writes or verb in ("INSERT", "UPDATE", "DELETE")):
            state["armed"] = False
            state["fired"] += 1
            raise sa.exc.OperationalError(statement, {}, Aborted("could not serialize access"))

    event.listen(engine, "before_cursor_execute", abort)
    yield state
    event.remove(engine, "before_cursor_execute", abort)


def test_a_write_the_database_aborts_is_run_again(engine, clients, one_abort):
    client, old = clients
    for method, path, request in STORY:
        one_abort["armed"] = True
        fired = one_abort["fired"]
        resp = request(client, old)
        assert resp.status_code < 300, (method, path, resp.status_code, resp.text)
        assert one_abort["fired"] == fired + 1, (method, path)  # it did abort once
    with transaction(engine) as conn:  # the story's end, whole: no write lost or doubled
        rows = conn.exec_driver_sql("SELECT count(*) FROM allocations").scalar()
    assert rows == 1  # SERVER's one allocation (VCPU 3 on the child) is all that is left
    assert client.simulate_get(f"/allocations/{SERVER}").json["allocations"] == {
        CHILD: {"resources": {"VCPU": 3}, "generation": _generation(client, CHILD)}
    }


def test_a_write_that_loses_every_run_is_a_503_not_a_500(engine, clients, one_abort):
    client, _ = clients

    def always(*_args) -> None:  # noqa: ANN002
        one_abort["armed"] = True

    event.listen(engine, "after_cursor_execute", always)
    try:
        resp = client.simulate_post("/resource_providers", json={"name": "x", "uuid": RP})
    finally:
        event.remove(engine, "after_cursor_execute", always)
    assert resp.status_code == 503, resp.text
    assert resp.headers["retry-after"]
    assert client.simulate_get(f"/resource_providers/{RP}").status_code == 404
