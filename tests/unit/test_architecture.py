"""The layering rules (FORBIDDEN, below), checked on the import graph, and the data
tables that must stay well-formed (error codes, microversions, routes)."""

from __future__ import annotations

import ast
import collections
import functools
from pathlib import Path

import falcon.inspect

from tally.config import Settings
from tally.placement import errors, microversion
from tally.placement.app import ROUTES, create_app

SRC = Path(__file__).resolve().parents[2] / "src" / "tally"

# package (relative to src/tally) -> modules it must never reach: neither import
# directly nor through any chain of tally imports (a -> b -> banned)
ABOVE_DB = ("tally.placement", "tally.books", "tally.serve", "tally.cli", "tally.doctor")
ABOVE_DB += ("tally.ui", "tally.compute", "tally.identity", "tally.nova", "tally.clients")
OUTSIDE = ("tally.serve", "tally.cli", "tally.ui", "tally.doctor")
FORBIDDEN = {
    "placement/handlers": ("sqlalchemy", "tally.db"),
    "placement/ledger": ("falcon",),
    "doctor": (
        "tally.placement",
        "tally.db",
        "sqlalchemy",
        "click",
        "tally.serve",
        "tally.cli",
        "tally.ui",
    ),
    "clients": ("tally.placement", "tally.db", "sqlalchemy", "click", *OUTSIDE),
    # the lab compute speaks to Placement only over its API (never its tables or code)
    "compute": ("tally.placement", "tally.db.schema", "click", *OUTSIDE, "tally.books"),
    "compute/handlers": ("sqlalchemy", "tally.db"),
    "compute/ops": ("sqlalchemy", "tally.db", "falcon"),
    "compute/store": ("falcon", "httpx"),
    "identity": ("tally.placement", "tally.compute", "click", *OUTSIDE),
    # the storage layer is the bottom: no HTTP, no command line, nothing above it
    "db": ("falcon", "click", "httpx", *ABOVE_DB),
    # moving the books reads and writes tables; it serves nothing and prompts nothing
    "books": ("falcon", "click", "tally.serve", "tally.cli", "tally.ui", "tally.doctor"),
    # Nova's rules are arithmetic over what the APIs say: no tables, no server
    "nova": ("sqlalchemy", "falcon", "tally.db", "tally.placement", "tally.serve"),
    # serving composes the apps; the command line starts it, never the other way
    "serve": ("click", "tally.cli"),
    # the operator page is a client of the API, as the CLI: it reads through
    # tally.clients, and the server it runs in hands it its client and its gate
    # (tally.serve.page), so no chain from it reaches Placement's code at all
    "ui": ("tally.placement", "tally.db", "sqlalchemy"),
    # no layer reaches up to what serves it, starts it or reads it from outside
    "placement": ("click", *OUTSIDE, "tally.compute", "tally.identity", "tally.books"),
    # the command line starts the server and speaks to services; Placement's own code
    # it reaches only through what serves it (tally.serve) or readies its database
    "cli": ("falcon", "tally.placement.handlers", "tally.ui"),
}

# package -> the layers it reaches a banned module through by design: a chain may
# enter one of these (the layer that owns that dependency) and is not followed
# past it. The package's own imports are never excused.
THROUGH = {
    # `tally serve` and `tally db` reach the server's code through what composes it
    "cli": ("tally.serve",),
    # handlers make one ledger call; the service context carries the ledger's engine
    # (and the schemas bound the API's input by the columns' ranges, tally.db.schema)
    "placement/handlers": (
        "tally.placement.ledger",
        "tally.placement.context",
        "tally.placement.schemas",
    ),
    # compute handlers and ops keep their rows through the store; the context has its engine
    "compute/handlers": ("tally.compute.store", "tally.compute.context"),
    "compute/ops": ("tally.compute.store", "tally.compute.context"),
}

# Data every layer may read although its package is banned to it: modules that
# import nothing of tally (checked below). The microversions Placement serves are
# the ones the clients, the CLI, the page and the lab speak; the error codes, those a
# client matches.
LEAVES = ("tally.placement.microversion", "tally.placement.errors")

# Known offences waiting for a refactor: (package, importing module, banned import),
# each with a comment saying why and what would fix it. The test fails when one is
# gone, so the list only shrinks.
ALLOWED: set[tuple[str, str, str]] = set()  # (package, importer, banned): none today


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    """`name` is one of `prefixes` or inside one (`a.b` is under `a`; `ab` is not)."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_file(name: str, root: Path = SRC.parent) -> Path | None:
    """The file of a tally module (None for any other name)."""
    if not under(name, ("tally",)):
        return None
    base = root.joinpath(*name.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def module_name(path: Path, root: Path = SRC.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def imports_of(path: Path, root: Path = SRC.parent) -> frozenset[str]:
    """The modules a file imports, anywhere in it (inside functions and `if
    TYPE_CHECKING:` blocks too): `from a import b` names `a.b` when that is a
    tally module, else `a`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if module_file(submodule, root) else node.module)
    return frozenset(found)


def runs(name: str, root: Path = SRC.parent) -> list[str]:
    """The tally modules that importing `name` runs: its packages, then itself."""
    parts = name.split(".")
    prefixes = (".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return [m for m in prefixes if module_file(m, root)]


def banned_chains(
    start: str, banned: tuple[str, ...], through: tuple[str, ...] = (), root: Path = SRC.parent
) -> dict[tuple[str, str], list[str]]:
    """(module, banned import it makes) -> the shortest chain of tally imports
    from `start` to that module, for every banned import `start` reaches. Chains
    stop at a banned module and at a module `through` excuses."""
    came_from: dict[str, str | None] = {start: None}
    queue = collections.deque([start])
    found: dict[tuple[str, str], list[str]] = {}
    while queue:
        current = queue.popleft()
        for name in sorted(imports_of(module_file(current, root), root)):
            if under(name, banned) and not under(name, LEAVES):
                chain, step = [], current
                while step is not None:
                    chain.append(step)
                    step = came_from[step]
                found.setdefault((current, name), chain[::-1])
                continue
            for module in runs(name, root):
                if module not in came_from and not under(module, banned + through):
                    came_from[module] = current
                    queue.append(module)
    return found


def test_layers_do_not_reach_forbidden_modules():
    """Each offence once, by the import that makes it, with the shortest chain
    from a module of the package."""
    chains: dict[tuple[str, str, str], list[str]] = {}
    for package, banned in FORBIDDEN.items():
        for path in sorted((SRC / package).rglob("*.py")):
            found = banned_chains(module_name(path), banned, THROUGH.get(package, ()))
            for (importer, name), chain in found.items():
                key = (package, importer, name)
                if key not in chains or len(chain) < len(chains[key]):
                    chains[key] = chain
    offences = sorted(
        f"{package}: {' -> '.join([*chain, name])}"
        for (package, importer, name), chain in chains.items()
        if (package, importer, name) not in ALLOWED
    )
    assert offences == []
    assert ALLOWED - chains.keys() == set(), "allowed offences that are gone: drop them"


def test_leaves_import_nothing_of_tally():
    """A leaf (and each package it runs) reaches no other tally module."""
    for leaf in LEAVES:
        for module in runs(leaf):
            reached = [m for m in imports_of(module_file(module)) if under(m, ("tally",))]
            assert reached == [], f"{module} imports {reached}"


def test_banned_imports_are_found_through_any_chain(tmp_path):
    """The check itself, on a small tree: a function-level import counts, a
    package's __init__ runs, and a layer named in `through` stops the chain."""
    files = {
        "tally/__init__.py": "",
        "tally/low.py": "import falcon\n",
        "tally/mid/__init__.py": "from tally import low\n",
        "tally/mid/inner.py": "",
        "tally/top.py": "def f():\n    from tally.mid.inner import g\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = banned_chains("tally.top", ("falcon",), root=tmp_path)
    assert found == {("tally.low", "falcon"): ["tally.top", "tally.mid", "tally.low"]}
    assert banned_chains("tally.top", ("falcon",), ("tally.mid",), root=tmp_path) == {}
    assert banned_chains("tally.top", ("tally.low",), root=tmp_path) == {
        ("tally.mid", "tally.low"): ["tally.top", "tally.mid"]
    }


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


def test_microversions_are_contiguous_from_1_0():
    """One row a microversion, none skipped; the newest is the last (`NEWEST`)."""
    assert microversion.VERSIONS == tuple(f"1.{n}" for n in range(len(microversion.VERSIONS)))
    assert len(microversion.VERSIONS) >= 40  # 1.39 at least: the API we answer for
    assert microversion.NEWEST == microversion.VERSIONS[-1]


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
        "/tally/v1/history": ["GET"],  # Tally's own API, outside Placement's
        "/tally/v1/failures": ["GET"],
        "/tally/v1/amounts": ["GET"],
        "/tally/v1/allocation_candidates/why": ["GET"],
        "/tally/v1/sandboxes": ["GET", "POST"],  # what if (issue 41)
        "/tally/v1/sandboxes/{sandbox}": ["DELETE", "GET"],
        "/tally/v1/sandboxes/{sandbox}/changes": ["POST"],
        "/tally/v1/sandboxes/{sandbox}/diff": ["GET"],
        "/tally/v1/sandboxes/{sandbox}/commit": ["POST"],
        "/tally/v1/sandboxes/{sandbox}/allocation_candidates": ["GET"],
        "/tally/v1/sandboxes/{sandbox}/allocation_candidates/why": ["GET"],
        "/tally/v1/sandboxes/{sandbox}/resource_providers/{uuid}/usages": ["GET"],
        "/tally/v1/sandboxes/{sandbox}/amounts": ["GET"],
    }


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


# calls only the write helper makes: (module, function) -> the files that may call it
WRITE_HELPER_ONLY = {
    ("tally.db.journal", "touch"): ("db/journal.py", "placement/ledger/provider_bumps.py"),
    ("tally.db.history_writer", "note"): (
        "db/history_writer.py",
        "placement/ledger/history_records.py",
    ),
}


def calls_of(path: Path, module: str, function: str) -> list[int]:
    """Lines of `path` that call `module.function` (through `import`, `from ...
    import` of the module or of the function, under any alias)."""
    tree = ast.parse(path.read_text())
    package, _, name = module.rpartition(".")
    modules: set[str] = set()
    functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == package:
            modules.update(a.asname or a.name for a in node.names if a.name == name)
        elif isinstance(node, ast.ImportFrom) and node.module == module:
            functions.update(a.asname or a.name for a in node.names if a.name == function)
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == module and a.asname)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in functions:
            lines.append(node.lineno)
        elif isinstance(f, ast.Attribute) and f.attr == function:
            owner = f.value
            if isinstance(owner, ast.Name) and owner.id in modules:
                lines.append(node.lineno)
            elif ast.unparse(owner) == module:
                lines.append(node.lineno)
    return lines


def test_only_the_write_helper_names_what_a_write_changed():
    """A write's providers are noted in the journal by its generation bump (or the
    history call of a change that bumps none: `provider_bumps.changed`), and its
    history rows by `history_records`; the rest is derived by the write helper as
    it commits. No write path calls `journal.touch` or the history writer itself."""
    offences = [
        f"{path.relative_to(SRC)}:{line} calls {module}.{function}"
        for (module, function), allowed in WRITE_HELPER_ONLY.items()
        for path in sorted(SRC.rglob("*.py"))
        if str(path.relative_to(SRC)) not in allowed
        for line in calls_of(path, module, function)
    ]
    assert offences == []


def test_calls_of_a_function_are_found_however_imported(tmp_path):
    package = tmp_path / "tally"
    package.mkdir()
    source = package / "x.py"
    source.write_text(
        "from tally.db import journal\nfrom tally.db import journal as j\n"
        "from tally.db.journal import touch as t\nimport tally.db.journal\n"
        "journal.touch(c, ())\nj.touch(c, ())\nt(c, ())\ntally.db.journal.touch(c, ())\n"
        "journal.touch_everything(c)\nother.touch(c)\n"
    )
    assert calls_of(source, "tally.db.journal", "touch") == [5, 6, 7, 8]


def import_rings(root: Path = SRC) -> list[list[str]]:
    """The rings of the import graph of every module under `root` (its strongly
    connected components of more than one module), typing-only imports included."""
    modules = {module_name(path, root.parent): path for path in root.rglob("*.py")}
    graph = {
        name: sorted(m for m in imports_of(path, root.parent) if m in modules and m != name)
        for name, path in modules.items()
    }
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    rings: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            ring = []
            while True:
                member = stack.pop()
                ring.append(member)
                if member == node:
                    break
            if len(ring) > 1:
                rings.append(sorted(ring))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return rings


def test_the_import_graph_has_no_ring():
    """Imports point one way (the candidate search as a pipeline, request -> search
    -> combine -> summaries -> render with the index beneath; the guard beside the
    inventory writes, not around them): no module reaches itself again."""
    assert import_rings() == []


def test_a_ring_is_found(tmp_path):
    package = tmp_path / "tally"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from tally import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tally import a\n"
    )
    (package / "c.py").write_text("from tally import a\n")
    assert import_rings(package) == [["tally.a", "tally.b"]]


CANDIDATES = SRC / "placement" / "ledger" / "candidates"
# The modules that may read the index's structures: the index itself, and the one
# that adapts it to the search's `Source` (view.py).
# (And a sandbox's: ledger/sandbox/patch.py, the patch in the index's ids, and view.py,
# the index with the patch laid over.)
INDEX_ADAPTER = {
    CANDIDATES / "index.py",
    CANDIDATES / "view.py",
    SRC / "placement" / "ledger" / "sandbox" / "patch.py",
    SRC / "placement" / "ledger" / "sandbox" / "view.py",
}


def _source_offences(path: Path) -> list[str]:
    """Where `path` asks its source which class it is (`isinstance(x, View)`),
    reaches into the index (`<anything>.index.<name>`) or finds a process-wide
    index (`index.shared`, `shared_index`)."""
    found = []
    shown = path.relative_to(SRC.parent) if path.is_relative_to(SRC.parent) else path.name
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{shown}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            kinds = node.args[1] if len(node.args) == 2 else None
            names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
            if any(getattr(name, "id", getattr(name, "attr", None)) == "View" for name in names):
                found.append(f"{where}: isinstance(..., View)")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "index"
            and path not in INDEX_ADAPTER
        ):
            found.append(f"{where}: .index.{node.attr} outside the index's adapter")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith(".index"):
            if any(alias.name == "shared" for alias in node.names):
                found.append(f"{where}: imports index.shared")
        if isinstance(node, ast.Name | ast.Attribute) and "shared_index" in (
            getattr(node, "id", None),
            getattr(node, "attr", None),
        ):
            found.append(f"{where}: shared_index")
    return found


def test_the_search_speaks_to_one_source():
    """No `isinstance(..., View)` in src/, no `.index.` outside the index's adapter,
    and no process-wide index (create_app hands each app its own, or the one given)."""
    offences = [o for path in sorted(SRC.rglob("*.py")) for o in _source_offences(path)]
    assert offences == []
    from tally.placement.ledger.candidates import index

    assert not hasattr(index, "shared")


def test_source_offences_are_found(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from tally.placement.ledger.candidates.index import shared\n"
        "if isinstance(snap, (Snapshot, views.View)):\n"
        "    snap.index.roots\n"
    )
    assert _source_offences(bad) == [
        "bad.py:1: imports index.shared",
        "bad.py:2: isinstance(..., View)",
        "bad.py:3: .index.roots outside the index's adapter",
    ]
