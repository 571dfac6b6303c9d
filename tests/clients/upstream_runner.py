"""Runs other projects' own functional tests against a live Placement.

Executed by the python of a throw-away venv that holds the client (osc-placement or
nova), its test dependencies and upstream Placement's test fixtures; it imports
nothing from Tally. The one thing replaced is upstream's in-process
`placement.tests.functional.fixtures.placement.PlacementFixture` (a wsgi-intercept of
Placement over an in-RAM database): a fixture of the same constructor whose
`endpoint` and `token` are those of the live server. Subclasses that the clients
define on it (nova's `nova.tests.functional.fixtures.PlacementFixture`) are made
after this swap, so they reach the live server too.

    python upstream_runner.py --endpoint URL [--token admin] --result FILE TEST_NAME...

TEST_NAME is anything `unittest` loads by name (module, class or test). The outcome
goes to FILE as JSON: counts, and the id and traceback of each failure and error;
the exit code is 0 only when at least one test ran and none failed."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import unittest

import fixtures


def live_fixture(endpoint: str, default_token: str) -> type:
    class LivePlacementFixture(fixtures.Fixture):
        """Where upstream's PlacementFixture stood: same arguments, a live server."""

        def __init__(
            self,
            token=None,
            conf_fixture=None,
            db=True,
            use_intercept=True,
            register_opts=True,
        ):
            super().__init__()
            self.token = token or default_token
            self.conf_fixture = conf_fixture
            self.db = db
            self.use_intercept = use_intercept
            self.register_opts = register_opts

        def _setUp(self):
            self.endpoint = endpoint

    return LivePlacementFixture


def import_packages_above(name: str) -> None:
    """Imports the packages that hold a test module, as a runner's discovery would,
    before anything else: their import-time setup (nova.tests.functional patches
    eventlet in) must run first, as it does under nova's own runner."""
    parts = name.split(".")
    for end in range(1, len(parts)):
        package = ".".join(parts[:end])
        spec = importlib.util.find_spec(package)
        if spec is None or spec.submodule_search_locations is None:
            return
        importlib.import_module(package)


class Result(unittest.TextTestResult):
    """Also keeps the ids of the tests that passed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test.id())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--token", default="admin")
    parser.add_argument("--result", required=True)
    parser.add_argument("names", nargs="+")
    args = parser.parse_args()

    for name in args.names:
        import_packages_above(name)
    from placement.tests.functional.fixtures import placement as upstream

    upstream.PlacementFixture = live_fixture(args.endpoint, args.token)

    suite = unittest.defaultTestLoader.loadTestsFromNames(args.names)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Result)
    result = runner.run(suite)
    outcome = {
        "run": result.testsRun,
        "passed": result.passed,
        "failures": [{"id": t.id(), "traceback": tb} for t, tb in result.failures],
        "errors": [{"id": t.id(), "traceback": tb} for t, tb in result.errors],
        "skipped": [{"id": t.id(), "reason": why} for t, why in result.skipped],
        "unexpected_successes": [t.id() for t in result.unexpectedSuccesses],
    }
    with open(args.result, "w") as out:
        json.dump(outcome, out, indent=1)
    return 0 if result.testsRun and result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
