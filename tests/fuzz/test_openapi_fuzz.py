"""Property-based fuzz of the API against its own OpenAPI document.

Schemathesis loads `GET /openapi.json?microversion=X` from the app, in process
(WSGI), and generates requests with Hypothesis, positive (valid for the
document) and negative (invalid in one place), for every operation in every
band of microversions where its document changes.

Bands come from the documents themselves: for each operation, a band is a run of
microversions over which its documented parameters, body and answers stay the
same; each is fuzzed at its first and at its last microversion (143 runs at 37
microversions today). The last one of a band also carries the switches that
change behaviour but no shape (1.22 forbidden traits, 1.23 error codes, 1.24
repeated member_of, 1.26 reserved == total, 1.32, 1.37 re-parenting, 1.39 any-of
traits).

Checks on every answer:
- no 5xx;
- the status code is documented for the operation, with its content type, and
  the body matches the documented schema: for a 4xx, Placement's error body,
  whose request_id is the response's and whose `code` is there from 1.23 only;
- a request the document calls valid is never refused by the schema validator
  (the document's schemas are the ones the handlers validate with);
- data the document calls invalid is refused (4xx);
- a refused write (4xx) changes nothing: not a row of any table, nor the API's
  view (GET /resource_providers, the named provider's inventories and usages,
  the named consumer's allocations).

Positive requests are aimed at a small known world (`World.seed`): path
parameters, body keys and query values (in their grammar, which the document
leaves to prose) are drawn partly from its providers, consumers, classes and
traits, and half of the generations sent are the current ones, so that reads
find something and writes also succeed. Bounded: EXAMPLES requests per band, derandomized (the same
requests every run, so CI is repeatable). SQLite by default; PostgreSQL when
TALLY_TEST_DATABASE is set (TALLY_FUZZ_BACKEND=sqlite keeps SQLite). The counts
are printed at the end of the run (conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

import falcon.testing
import hypothesis
import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tally.config import Settings
from tally.db.engine import make_engine
from tally.db.schema import metadata
from tally.placement import microversion, openapi
from tally.placement.app import ROUTES, create_app
from tally.placement.ledger.bootstrap import prepare_database

EXAMPLES = 10  # requests per (operation, microversion) run
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
WRITES = ("PUT", "POST", "DELETE")
# Contradictions with the document that are reported and await a fix outside this
# test: a failing request whose report matches one counts as known, not failed.
KNOWN: tuple[re.Pattern, ...] = ()  # answers known to contradict the document: none
LATEST = microversion.VERSIONS[-1]


def operation_bands() -> list[tuple[str, str, str]]:
    """(microversion, METHOD, path): the first and last microversion of each run
    of versions over which an operation's document (less the version header)
    stays the same."""
    bands: dict[tuple[str, str, str], list[str]] = {}
    for version in microversion.VERSIONS:
        for path, item in openapi.document(ROUTES, version)["paths"].items():
            for method, operation in item.items():
                shape = dict(operation)
                shape["parameters"] = [
                    p for p in operation.get("parameters", []) if p["in"] != "header"
                ]
                key = (method.upper(), path, json.dumps(shape, sort_keys=True))
                bands.setdefault(key, []).append(version)
    runs = set()
    for (method, path, _), versions in bands.items():
        runs |= {(versions[0], method, path), (versions[-1], method, path)}
    return sorted(runs, key=lambda r: (microversion.as_tuple(r[0]), r[2], r[1]))


BANDS = operation_bands()

# ---------------------------------------------------------------- the known world

R1, C1, R2 = (f"{n:08x}-0000-4000-8000-000000000000" for n in (0xA1, 0xA2, 0xA3))
CONSUMER = "c0000000-0000-4000-8000-000000000001"
AGGREGATE = "a0000000-0000-4000-8000-000000000001"
CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_FUZZ")
TRAITS = ("CUSTOM_FUZZ_TRAIT", "HW_CPU_X86_AVX")
_UUID_KEY = re.compile(r"^[0-9a-fA-F-]{36}$")  # a body key naming a provider or consumer


class World:
    """The app over one database, an admin client for setting and reading state
    (at the latest microversion), and the document of each microversion."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.app = create_app(Settings.of(), engine)
        self.admin = falcon.testing.TestClient(
            self.app,
            headers={"x-auth-token": "admin", "openstack-api-version": f"placement {LATEST}"},
        )
        self.schemas: dict[str, Any] = {}
        self.changed = True  # by a write since the last `seed`

    def schema(self, version: str) -> Any:
        if version not in self.schemas:
            self.schemas[version] = schemathesis.openapi.from_wsgi(
                f"{openapi.PATH}?microversion={version}", self.app
            )
        return self.schemas[version]

    def call(self, method: str, path: str, body: Any = None) -> falcon.testing.Result:
        result = self.admin.simulate_request(method, path, json=body)
        assert result.status_code < 500, (method, path, result.text)
        return result

    def seed(self) -> None:
        """Put back whatever the fuzz removed of the known world: R1 (child C1)
        and R2 in one aggregate, with inventory, traits and one consumer on R1.
        (Only writes that succeed change state: a refused one is checked to change
        nothing.)"""
        if not self.changed:
            return
        self.changed = False
        self.call("PUT", "/resource_classes/CUSTOM_FUZZ")
        self.call("PUT", "/traits/CUSTOM_FUZZ_TRAIT")
        for uuid, parent in ((R1, None), (C1, R1), (R2, None)):
            if self.call("GET", f"/resource_providers/{uuid}").status_code == 404:
                body = {"uuid": uuid, "name": f"fuzz-{uuid[:8]}", "parent_provider_uuid": parent}
                self.call("POST", "/resource_providers", body)
        inventory = {
            R1: {"VCPU": 16, "MEMORY_MB": 8192},
            C1: {"DISK_GB": 100},
            R2: {"VCPU": 8, "CUSTOM_FUZZ": 4},
        }
        for uuid, amounts in inventory.items():
            found = self.call("GET", f"/resource_providers/{uuid}/inventories").json
            if not found["inventories"]:
                body = {
                    "inventories": {rc: {"total": total} for rc, total in amounts.items()},
                    "resource_provider_generation": found["resource_provider_generation"],
                }
                self.call("PUT", f"/resource_providers/{uuid}/inventories", body)
        if not self.call("GET", f"/allocations/{CONSUMER}").json["allocations"]:
            body = {
                "allocations": {R1: {"resources": {"VCPU": 2, "MEMORY_MB": 512}}},
                "project_id": "fuzz-project",
                "user_id": "fuzz-user",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            self.call("PUT", f"/allocations/{CONSUMER}", body)
        for uuid in (R1, R2):
            self._associate(uuid, "aggregates", [AGGREGATE])
        self._associate(R1, "traits", list(TRAITS))

    def _associate(self, uuid: str, what: str, names: list[str]) -> None:
        found = self.call("GET", f"/resource_providers/{uuid}/{what}")
        if found.status_code == 200 and not found.json[what]:
            body = {
                what: names,
                "resource_provider_generation": found.json["resource_provider_generation"],
            }
            self.call("PUT", f"/resource_providers/{uuid}/{what}", body)

    def generation(self, uuid: str) -> int | None:
        found = self.call("GET", f"/resource_providers/{uuid}")
        return found.json["generation"] if found.status_code == 200 else None

    def consumer_generation(self, consumer: str) -> int | None:
        """(None for a consumer holding nothing: a new one.)"""
        return self.call("GET", f"/allocations/{consumer}").json.get("consumer_generation")

    def snapshot(self, case: Any) -> tuple[dict, list]:
        """Every row of every table, and the API's view of what the request names."""
        with self.engine.connect() as conn:
            rows = {
                table.name: sorted(repr(tuple(row)) for row in conn.execute(table.select()))
                for table in metadata.sorted_tables
            }
        reads = ["/resource_providers"]
        uuid = case.path_parameters.get("uuid")
        if uuid:
            reads += [f"/resource_providers/{uuid}/{part}" for part in ("inventories", "usages")]
        consumer = case.path_parameters.get("consumer_uuid")
        if consumer:
            reads.append(f"/allocations/{consumer}")
        view = [(path, *self._read(path)) for path in reads]
        return rows, view

    def _read(self, path: str) -> tuple[int, Any]:
        result = self.admin.simulate_get(path)
        return result.status_code, result.json if result.status_code == 200 else None


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, fuzz_run: Any) -> Iterator[World]:
    server = os.environ.get("TALLY_TEST_DATABASE", "")
    if server and os.environ.get("TALLY_FUZZ_BACKEND", "") != "sqlite":
        from fresh_db import create_database  # tests/conformance (put on the path by conftest)

        url, drop = create_database(server, "tally_fuzz_" + os.urandom(6).hex())
        fuzz_run.backend = "postgresql"
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'tally.sqlite'}"
        drop = None
        fuzz_run.backend = "sqlite"
    engine = make_engine(url)
    prepare_database(engine)
    yield World(engine)
    engine.dispose()
    if drop:
        drop()


# ---------------------------------------------------------------- aiming


def _aim_path(case: Any, data: st.DataObject) -> None:
    """Most path parameters name something that exists (what the document allows)."""
    params = case.path_parameters
    known = {
        "uuid": [R1, C1, R2],
        "consumer_uuid": [CONSUMER],
        "resource_class": list(CLASSES),
        "name": list(TRAITS if case.path.startswith("/traits") else CLASSES),
    }
    for parameter in case.operation.definition.raw.get("parameters", []):
        name = parameter["name"]
        if parameter["in"] != "path" or name not in known:
            continue
        pattern = parameter["schema"].get("pattern", "")
        values = [value for value in known[name] if re.search(pattern, value)]
        params[name] = data.draw(st.sampled_from([*values, params[name]]), label=name)


_TRAIT_LIST = st.lists(
    st.sampled_from(["CUSTOM_FUZZ_TRAIT", "HW_CPU_X86_AVX", "!HW_CPU_X86_SSE"]),
    min_size=1,
    max_size=2,
    unique=True,
).map(",".join)
# Query values in the grammar the document leaves to the prose (it says "string"),
# by the parameter's name without its group suffix.
_QUERY_GRAMMAR = {
    "resources": st.lists(
        st.tuples(st.sampled_from(CLASSES), st.integers(1, 4)),
        min_size=1,
        max_size=3,
        unique_by=lambda item: item[0],
    ).map(lambda items: ",".join(f"{rc}:{n}" for rc, n in items)),
    "required": _TRAIT_LIST,
    "root_required": _TRAIT_LIST,
    "member_of": st.sampled_from([AGGREGATE, f"in:{AGGREGATE},{CONSUMER}", f"!{CONSUMER}"]),
    "in_tree": st.sampled_from([R1, C1, R2]),
    "associated": st.sampled_from(["true", "false"]),
    "project_id": st.just("fuzz-project"),
    "consumer_type": st.sampled_from(["INSTANCE", "all", "unknown"]),
}
_TRAIT_FILTER = st.sampled_from(["in:CUSTOM_FUZZ_TRAIT,HW_CPU_X86_AVX", "startswith:CUSTOM_"])


def _aim_query(case: Any, data: st.DataObject) -> None:
    """Half the query values in their grammar, naming the known world; a request
    for candidates asks for resources at least half the time."""
    query = case.query
    if case.path == "/allocation_candidates" and not any(k.startswith("resources") for k in query):
        if data.draw(st.booleans(), label="add resources"):
            query["resources"] = ""
    for key in list(query):
        base = re.sub(r"^(resources|required|member_of|in_tree).*$", r"\1", key)
        if (case.path, key) == ("/traits", "name"):
            grammar = _TRAIT_FILTER
        else:
            grammar = _QUERY_GRAMMAR.get(base)
        if grammar is not None and (not query[key] or data.draw(st.booleans(), label=key)):
            query[key] = data.draw(grammar, label=key)


def _aim_body(world: World, case: Any, data: st.DataObject) -> None:
    """Body keys that name providers, consumers and classes drawn mostly from the
    known ones (each key at most once), amounts, names and traits half the time
    ones that exist or fit, and the generations sent half the time the current ones."""
    body = case.body
    if not isinstance(body, dict):
        return
    if case.path == "/allocations":  # {consumer: allocations}
        for key in [k for k in list(body) if _UUID_KEY.match(k)]:
            _rename(body, key, [CONSUMER, str(data.draw(st.uuids(), label="new"))], data)
    for container in _containers(body):
        for key in list(container):
            pool = [R1, C1, R2] if _UUID_KEY.match(key) else list(CLASSES)
            new = _rename(container, key, pool, data)
            if isinstance(container.get(new), int) and data.draw(st.booleans(), label="small"):
                container[new] = data.draw(st.integers(1, 4), label="amount")
    for entry in body.get("allocations") if isinstance(body.get("allocations"), list) else []:
        provider = entry.get("resource_provider") if isinstance(entry, dict) else None
        if isinstance(provider, dict) and "uuid" in provider:
            provider["uuid"] = data.draw(st.sampled_from([R1, C1, R2, provider["uuid"]]))
    if isinstance(body.get("traits"), list) and data.draw(st.booleans(), label="traits"):
        body["traits"] = data.draw(st.lists(st.sampled_from(TRAITS), unique=True), label="traits")
    if case.path.startswith("/resource_providers") and isinstance(body.get("name"), str):
        if data.draw(st.booleans(), label="name"):
            body["name"] = "fuzz-" + data.draw(st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True))
    uuid = case.path_parameters.get("uuid")
    if "resource_provider_generation" in body and uuid and data.draw(st.booleans()):
        current = world.generation(uuid)
        if current is not None:
            body["resource_provider_generation"] = current
    consumer = case.path_parameters.get("consumer_uuid")
    if "consumer_generation" in body and consumer and data.draw(st.booleans()):
        body["consumer_generation"] = world.consumer_generation(consumer)


def _rename(container: dict, key: str, pool: list[str], data: st.DataObject) -> str:
    """`key` of `container` renamed to one of `pool` not in it yet, or kept when it
    is a good name (a uuid-like key that no uuid parses is dropped if it cannot be
    renamed and is not alone); its name after ("" when dropped)."""
    good = not _UUID_KEY.match(key) or _is_uuid(key)
    choices = [name for name in pool if name not in container] + ([key] if good else [])
    if not choices:
        if good or len(container) == 1:
            return key
        del container[key]
        return ""
    new = data.draw(st.sampled_from(choices), label="key")
    container[new] = container.pop(key)
    return new


def _is_uuid(value: str) -> bool:
    try:
        uuidlib.UUID(value)
    except ValueError:
        return False
    return True


def _containers(body: dict) -> Iterator[dict]:
    """The objects of a body keyed by provider uuid or resource class."""
    for name in ("allocations", "inventories", "resources"):
        value = body.get(name)
        if isinstance(value, list):  # before 1.12: [{"resource_provider", "resources"}]
            for entry in value:
                if isinstance(entry, dict):
                    yield from _containers(entry)
        if isinstance(value, dict):
            yield value
            for entry in value.values():
                if isinstance(entry, dict):
                    yield from _containers(entry)
    for key, value in body.items():  # POST /allocations: {consumer: body}
        if _UUID_KEY.match(key) and isinstance(value, dict):
            yield from _containers(value)


# ---------------------------------------------------------------- checks


def _is_positive(case: Any) -> bool:
    meta = case.meta
    return meta is not None and not any(c.mode.is_negative for c in meta.components.values())


def _error_problems(case: Any, response: Any, version: str) -> list[str]:
    """Placement's error body, beyond its schema: the request id of the response,
    its own status, and `code` exactly from 1.23."""
    if response.status_code < 400 or not response.headers.get("content-type", [""])[0].startswith(
        "application/json"
    ):
        return []
    error = json.loads(response.content)["errors"][0]
    problems = []
    if error.get("request_id") != response.headers.get("openstack-request-id", [None])[0]:
        problems.append(f"error request_id {error.get('request_id')!r} is not the response's")
    if error.get("status") != response.status_code:
        problems.append(f"error status {error.get('status')} in a {response.status_code}")
    versioned = case.path not in openapi.OPEN_PATHS
    if versioned and (microversion.as_tuple(version) >= (1, 23)) != ("code" in error):
        problems.append(f"error code {'missing' if 'code' not in error else 'present'}")
    if (
        _is_positive(case)
        and response.status_code == 400
        and "Failed validating" in (error.get("detail") or "")
    ):
        problems.append("a request valid for the document failed the handler's schema")
    return problems


def _format(case: Any, response: Any, problems: list[str]) -> str:
    request = response.request
    body = request.body.decode(errors="replace") if isinstance(request.body, bytes) else ""
    return (
        f"{case.method} {request.url} {dict(case.headers)}\n  body: {body[:600]}\n"
        f"  -> {response.status_code} {response.content[:600]!r}\n  - " + "\n  - ".join(problems)
    )


def fuzz(world: World, run: Any, version: str, method: str, path: str) -> list[str]:
    operation = world.schema(version)[path][method]
    headers = {"X-Auth-Token": "admin"}
    if path not in openapi.OPEN_PATHS:
        headers[openapi.HEADER] = f"placement {version}"
    strategies = [
        operation.as_strategy(generation_mode=mode, headers=headers)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    ]
    failures: list[str] = []

    @hypothesis.settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.given(case=st.one_of(strategies), data=st.data())
    def exchange(case: Any, data: st.DataObject) -> None:
        if _is_positive(case):
            _aim_path(case, data)
            _aim_query(case, data)
            _aim_body(world, case, data)
        write = case.method in WRITES
        before = world.snapshot(case) if write else None
        response = case.call()
        run.requests += 1
        run.statuses[response.status_code] += 1
        run.by_endpoint[(method, path)][response.status_code] += 1
        problems = []
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as group:
            problems += [f"{f.title}: {f.message}".strip() for f in group.exceptions]
        problems += _error_problems(case, response, version)
        world.changed |= write and response.status_code < 400
        if write and 400 <= response.status_code < 500:
            run.refused_writes_checked += 1
            after = world.snapshot(case)
            if after != before:
                problems.append(f"a refused write changed state: {_diff(before, after)}")
        if problems:
            report = _format(case, response, problems)
            if any(known.search(report) for known in KNOWN):
                run.known += 1
                run.known_example = run.known_example or report
            else:
                run.failures += 1
                failures.append(report)

    exchange()
    return failures


def _diff(before: tuple[dict, list], after: tuple[dict, list]) -> str:
    rows_before, view_before = before
    rows_after, view_after = after
    changed = [
        f"{name}: -{sorted(set(rows_before[name]) - set(rows))} "
        f"+{sorted(set(rows) - set(rows_before[name]))}"
        for name, rows in rows_after.items()
        if rows != rows_before[name]
    ]
    changed += [
        f"{a[0]}: {b[1:]} -> {a[1:]}"
        for b, a in zip(view_before, view_after, strict=True)
        if a != b
    ]
    return "; ".join(changed)[:2000]


@pytest.mark.parametrize(
    ("version", "method", "path"), BANDS, ids=[f"{v}-{m}-{p}" for v, m, p in BANDS]
)
def test_operation_conforms_to_its_document(
    world: World, fuzz_run: Any, timed: None, version: str, method: str, path: str
) -> None:
    world.seed()
    fuzz_run.tests += 1
    fuzz_run.endpoints.add((method, path))
    fuzz_run.microversions.add(version)
    failures = fuzz(world, fuzz_run, version, method, path)
    assert failures == [], f"{len(failures)} failing requests:\n\n" + "\n\n".join(failures)


def test_bands_cover_every_operation_and_microversion_switch() -> None:
    """Every operation of the latest document, and the first microversion of every
    operation, is fuzzed; so is each version whose behaviour changes without a shape."""
    fuzzed = {(m, p) for _, m, p in BANDS}
    latest = openapi.document(ROUTES, LATEST)["paths"]
    assert fuzzed == {(m.upper(), p) for p, item in latest.items() for m in item}
    assert {"1.0", "1.24", "1.32", "1.37", "1.39"} <= {v for v, _, _ in BANDS}
