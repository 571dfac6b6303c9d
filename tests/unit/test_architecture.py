"""The layering rules of DESIGN.md, checked on the import graph, and the data
tables that must stay well-formed (error codes, microversions, routes)."""

from __future__ import annotations

import ast
from pathlib import Path

import falcon.inspect

from tally.config import Settings
from tally.placement import errors, microversion
from tally.placement.app import ROUTES, create_app

SRC = Path(__file__).resolve().parents[2] / "src" / "tally"

# package (relative to src/tally) -> module prefixes it must never import
FORBIDDEN = {
    "placement/handlers": ("sqlalchemy", "tally.db"),
    "placement/ledger": ("falcon",),
    "doctor": ("tally.placement", "tally.db", "sqlalchemy"),
    "clients": ("tally.placement", "tally.db", "sqlalchemy"),
    # the lab compute speaks to Placement only over its API (never its tables or code)
    "compute": ("tally.placement", "tally.db.schema"),
    "compute/handlers": ("sqlalchemy", "tally.db"),
    "compute/ops": ("sqlalchemy", "tally.db", "falcon"),
    "compute/store": ("falcon", "httpx"),
    "identity": ("tally.placement", "tally.compute"),
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_layers_do_not_import_forbidden_modules():
    offences = []
    for package, banned in FORBIDDEN.items():
        for path in sorted((SRC / package).rglob("*.py")):
            for name in imports_of(path):
                if name.startswith(banned):
                    offences.append(f"{path.relative_to(SRC)} imports {name}")
    assert offences == []


def test_no_requests_library_anywhere():
    users = [p for p in SRC.rglob("*.py") if "requests" in imports_of(p)]
    assert users == []


def test_error_codes_are_unique_and_all_listed():
    declared = {
        name: value
        for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, str)
    }
    assert len(set(declared.values())) == len(declared)
    assert set(errors.ALL) == set(declared.values())
    assert all(code.startswith("placement.") for code in errors.ALL)


def test_microversions_are_contiguous_1_0_to_1_39():
    assert microversion.VERSIONS == tuple(f"1.{n}" for n in range(40))


def test_route_table_matches_the_placement_api(sqlite_engine):
    app = create_app(Settings.of(), sqlite_engine)
    served = {
        route.path: sorted(m.method for m in route.methods if not m.internal)
        for route in falcon.inspect.inspect_routes(app)
    }
    paths = [path for path, _ in ROUTES]
    assert len(paths) == len(set(paths))
    assert served == {
        "/": ["GET"],
        "/resource_providers": ["GET", "POST"],
        "/resource_providers/{uuid}": ["DELETE", "GET", "PUT"],
        "/resource_classes": ["GET", "POST"],
        "/resource_classes/{name}": ["DELETE", "GET", "PUT"],
        "/resource_providers/{uuid}/inventories": ["DELETE", "GET", "POST", "PUT"],
        "/resource_providers/{uuid}/inventories/{resource_class}": ["DELETE", "GET", "PUT"],
        "/resource_providers/{uuid}/aggregates": ["GET", "PUT"],
        "/traits": ["GET"],
        "/traits/{name}": ["DELETE", "GET", "PUT"],
        "/resource_providers/{uuid}/traits": ["DELETE", "GET", "PUT"],
        "/allocations": ["POST"],
        "/allocations/{consumer_uuid}": ["DELETE", "GET", "PUT"],
        "/resource_providers/{uuid}/allocations": ["GET"],
        "/resource_providers/{uuid}/usages": ["GET"],
        "/usages": ["GET"],
        "/allocation_candidates": ["GET"],
        "/reshaper": ["POST"],
        "/openapi.json": ["GET"],
    }


def test_modules_stay_small():
    """One job per module: handlers under ~300 lines, everything else under ~500."""
    too_long = []
    for path in sorted(SRC.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        limit = 300 if path.parent.name == "handlers" else 500
        lines = len(path.read_text().splitlines())
        if lines > limit:
            too_long.append(f"{path.relative_to(SRC)}: {lines} > {limit}")
    assert too_long == []


def test_handlers_hold_no_domain_exception_handling():
    handlers = SRC / "placement" / "handlers"
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in sorted(handlers.glob("*.py"))
        if path.name != "common.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Try)
    ]
    assert offenders == []
