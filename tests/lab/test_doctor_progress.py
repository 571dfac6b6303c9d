"""`tally audit` and `tally drain` say their phases on stderr when it is not a
terminal (issue 40, item 10: ansible, systemd and `| tee` saw nothing until the
end); stdout stays the data.

    cmp-1  web        cmp-2  db        cmp-3  (empty)
"""

from __future__ import annotations

import json
import re

from click.testing import Result

from tests.lab.conftest import tally_on

tally = tally_on


def phases(result: Result, command: str) -> list[str]:
    """The phases of its lines `COMMAND: PHASE [DONE[/TOTAL]]`, in order."""
    line = re.compile(rf"^{command}: (.*?)(?: \d+(?:/\d+)?)?$", re.M)
    return list(dict.fromkeys(line.findall(result.stderr)))


def test_audit_says_its_phases(two):
    two.compute.post("/os-lab/faults", {"fault": {"kind": "delete-while-down"}})
    result = tally(two, "audit", "--delete", "--apply", "-f", "json")
    assert result.exit_code == 4, result.output
    assert phases(result, "audit") == [
        "read the compute API",
        "read allocations of providers",
        "read the claim history",
        "write",
    ]
    assert [row["kind"] for row in json.loads(result.stdout)] == ["orphan"]


def test_drain_says_its_phases(two):
    result = tally(two, "drain", "cmp-1", "--apply", "--timeout", "0", "-f", "json")
    assert phases(result, "drain") == ["check the plan", "live-migrate"]
    assert "drain: check the plan 0/1" in result.stderr
    assert json.loads(result.stdout)["host"] == "cmp-1"
