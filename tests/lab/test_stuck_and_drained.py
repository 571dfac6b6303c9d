"""A stuck migration is seen by default and its age said right; a drained host is
said to stay disabled, with the command that enables it (issue 29, item 7: right
after `tally lab break migration-hang` the audit exited 0 for an hour, and
`--stuck-after 30s` said "running for 0m").

    cmp-1  web        cmp-2  db        cmp-3  (empty)
"""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.main import cli
from tally.doctor import audit
from tally.doctor.audit import duration
from tests.live import wait_until

ENABLE = "openstack compute service set --enable {host} nova-compute"


def stays_disabled(host: str) -> str:
    return (
        f"{host} stays disabled afterwards (nothing new is scheduled there); "
        f"enable it again with: {ENABLE.format(host=host)}"
    )


def world(lab):
    lab.hosts("cmp-1", "cmp-2", "cmp-3")
    lab.flavor()
    lab.web = lab.boot("web", availability_zone="nova:cmp-1")
    lab.db = lab.boot("db", availability_zone="nova:cmp-2")
    return lab


@pytest.fixture
def two(lab):
    """The lab with its clock stopped: moves step only when told."""
    return world(lab)


@pytest.fixture
def ticking(make_lab):
    """The lab as served: its moves step by themselves every 2 seconds."""
    return world(make_lab(lab_step_seconds=2))


def tally(lab, *args: str) -> Result:
    context = Context.for_client(lab.placement)
    context.compute = lab.compute
    return CliRunner().invoke(cli, list(args), obj=context)


def hang(lab) -> str:
    body = {"fault": {"kind": "migration-hang", "server": lab.web["id"]}}
    return lab.compute.post("/os-lab/faults", body)["fault"]["migration"]


def kinds(lab, later: dt.timedelta) -> dict[str, str]:
    now = dt.datetime.now(dt.UTC) + later
    return {
        c.consumer_uuid: c.kind for c in audit.audit(lab.placement, lab.compute, now=now).consumers
    }


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "0s"),
        (45, "45s"),
        (59.9, "59s"),
        (60, "1m"),
        (12 * 60 + 5, "12m"),
        (4 * 3600 + 30 * 60, "4h 30m"),
        (3 * 86400 + 2 * 3600, "3d 02h"),
    ],  # fmt: skip
)
def test_a_duration_is_said_in_its_unit(seconds, said):
    assert duration(dt.timedelta(seconds=seconds)) == said


def test_by_default_a_move_unchanged_for_five_minutes_is_stuck(two):
    migration = hang(two)
    assert kinds(two, dt.timedelta(minutes=4))[migration] == "migrating"
    assert kinds(two, dt.timedelta(minutes=6))[migration] == "stuck-migration"
    assert audit.STUCK_AFTER == dt.timedelta(minutes=5)
    assert "--stuck-after DURATION" in tally(two, "audit", "--help").output
    assert "[default: 5m]" in tally(two, "audit", "--help").output


def test_on_a_ticking_lab_three_missed_steps_are_enough(ticking):
    migration = hang(ticking)
    assert kinds(ticking, dt.timedelta(seconds=4))[migration] == "migrating"  # two steps
    found = audit.audit(
        ticking.placement,
        ticking.compute,
        now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=10),
    )
    stuck = next(c for c in found.consumers if c.consumer_uuid == migration)
    assert stuck.kind == "stuck-migration"
    assert re.search(r"running, unchanged for 1\ds$", stuck.reason), stuck.reason


def test_the_audit_says_how_long_in_seconds(two):
    migration = hang(two)
    found: list = []

    def stuck() -> bool:  # past 1 s, by the lab's updated_at (stamped to the second)
        result = tally(two, "audit", "--stuck-after", "1s", "-f", "json")
        found[:] = [result, [r for r in json.loads(result.stdout) if r["consumer"] == migration]]
        return [r["kind"] for r in found[1]] == ["stuck-migration"]

    assert wait_until(stuck, seconds=10, every=0.2), found[0].output
    result, (row,) = found
    assert result.exit_code == 3, result.output
    unchanged = re.search(r"running, unchanged for (\d)s$", row["reason"])
    assert unchanged and int(unchanged[1]) >= 1, row["reason"]  # past --stuck-after


def test_a_drain_says_the_host_stays_disabled_and_how_to_enable_it(two):
    dry = tally(two, "drain", "cmp-1")
    assert dry.stdout.splitlines()[-1] == f"with --apply: {stays_disabled('cmp-1')}"
    planned = json.loads(tally(two, "drain", "cmp-1", "-f", "json").stdout)
    assert planned["enable_command"] == ENABLE.format(host="cmp-1")
    assert two.service("cmp-1")["status"] == "enabled"  # a dry run disables nothing


def test_an_applied_drain_leaves_the_host_disabled_and_says_so(two):
    result = tally(two, "drain", "cmp-1", "--apply", "--timeout", "0")
    assert result.stdout.splitlines()[-1].startswith("cmp-1 stays disabled afterwards")
    assert two.service("cmp-1")["status"] == "disabled"
    # what the printed command does (osc's PUT /os-services/{id} from 2.53)
    two.compute.put(f"/os-services/{two.service('cmp-1')['id']}", {"status": "enabled"})
    assert two.service("cmp-1")["status"] == "enabled"


def test_explains_drain_step_says_the_host_stays_disabled(two):
    result = tally(two, "explain", "cmp-2", "--resource", "VCPU=16:16", "-f", "json")
    assert result.exit_code == 1, result.output
    (step,) = [
        s for s in json.loads(result.stdout)["steps"] if s["command"].startswith("tally drain")
    ]
    assert step["command"] == "tally drain cmp-2 --apply"
    assert step["text"].endswith(stays_disabled("cmp-2"))
