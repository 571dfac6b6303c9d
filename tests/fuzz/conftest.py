"""The counts of the fuzz run (tests/fuzz/test_openapi_fuzz.py), printed at the end of
the pytest run, and written as JSON to $TALLY_FUZZ_SUMMARY when that names a file."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import time

import pytest


@dataclasses.dataclass
class FuzzRun:
    requests: int = 0
    refused_writes_checked: int = 0
    failures: int = 0
    known: int = 0  # failing requests that match a reported, known contradiction
    known_example: str = ""
    tests: int = 0
    endpoints: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    microversions: set[str] = dataclasses.field(default_factory=set)
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    by_endpoint: dict = dataclasses.field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    seconds: float = 0.0
    backend: str = ""

    def summary(self) -> dict:
        return {
            "backend": self.backend,
            "requests": self.requests,
            "endpoints": len(self.endpoints),
            "microversions": len(self.microversions),
            "operation_bands": self.tests,
            "refused_writes_checked": self.refused_writes_checked,
            "failures": self.failures,
            "known": self.known,
            "statuses": dict(sorted(self.statuses.items())),
            "by_endpoint": {
                f"{method} {path}": dict(sorted(counts.items()))
                for (method, path), counts in sorted(self.by_endpoint.items())
            },
            "seconds": round(self.seconds, 1),
        }


RUN = FuzzRun()


@pytest.fixture(scope="session")
def fuzz_run() -> FuzzRun:
    return RUN


@pytest.fixture
def timed(fuzz_run: FuzzRun):
    started = time.monotonic()
    yield
    fuzz_run.seconds += time.monotonic() - started


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RUN.tests:
        return
    summary = RUN.summary()
    terminalreporter.write_sep("-", "OpenAPI fuzz")
    terminalreporter.write_line(
        f"{summary['requests']} requests over {summary['endpoints']} endpoints at "
        f"{summary['microversions']} microversions ({summary['operation_bands']} operation "
        f"bands, {summary['backend']}), {summary['refused_writes_checked']} refused writes "
        f"checked for side effects, {summary['failures']} failures ({summary['known']} more "
        f"known), in {summary['seconds']} s"
    )
    terminalreporter.write_line(f"statuses: {summary['statuses']}")  # by endpoint: the file
    if RUN.known_example:
        terminalreporter.write_line(f"a known one: {RUN.known_example}")
    path = os.environ.get("TALLY_FUZZ_SUMMARY")
    if path:
        with open(path, "w") as out:
            json.dump(summary, out, indent=2)
