"""`tally audit` end to end, one test per fault of the seed: the lab breaks it, the
audit classifies exactly the affected consumers, the fix clears it, and the
inventory change that was refused then goes through."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tally.cli.context import Context
from tally.cli.main import cli
from tally.doctor import drain

RESERVE_ALL = "VCPU=16:16"  # the seed's change: refused while anything holds VCPU


def run(lab, *args: str) -> tuple[int, dict | str]:
    """`tally ARGS -f json` in-process against the lab: (exit code, parsed output)."""
    context = Context.for_client(lab.placement)
    context.compute = lab.compute
    result = CliRunner().invoke(cli, [*args, "-f", "json"], obj=context)
    try:
        return result.exit_code, json.loads(result.output)
    except ValueError:
        return result.exit_code, result.output + repr(result.exception)


def classes(report: dict) -> dict[str, str]:
    return {c["consumer_uuid"]: c["kind"] for c in report["consumers"]}


def reserve_all(lab, rp: str, *resources: str) -> int:
    options = [item for r in resources or (RESERVE_ALL,) for item in ("--resource", r)]
    code, _ = run(lab, "provider", "inventory", "set", rp, "--amend", *options)
    return code


@pytest.fixture
def lab_engine(engine):
    """Every backend configured (SQLite; PostgreSQL and MySQL when set up)."""
    return engine


@pytest.fixture
def broken(cloud):
    cloud.web = cloud.boot("web", availability_zone="nova:cmp-1")
    cloud.db = cloud.boot("db", availability_zone="nova:cmp-2")
    cloud.app = cloud.boot("app", availability_zone="nova:cmp-3")
    cloud.rp = {h["name"]: h["provider_uuid"] for h in cloud.compute.get("/os-lab/hosts")["hosts"]}
    return cloud


def fault(lab, kind: str, **options: str) -> dict:
    body = {"fault": {"kind": kind, **options}}
    return lab.compute.post("/os-lab/faults", body)["fault"]


def test_a_healthy_cloud_is_all_live(broken):
    code, report = run(broken, "audit", "--verbose")
    assert code == 0, report
    ids = (broken.web["id"], broken.db["id"], broken.app["id"])
    assert classes(report) == dict.fromkeys(ids, "live")
    assert report["counts"]["live"] == 3 and report["clean"]


def test_orphan_of_a_delete_while_down(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    cmp1 = broken.rp["cmp-1"]
    assert reserve_all(broken, cmp1) == 1
    code, report = run(broken, "audit")
    assert code == 1
    assert classes(report) == {
        broken.web["id"]: "orphan",
        broken.db["id"]: "live",
        broken.app["id"]: "live",
    }
    code, dry = run(broken, "audit", "--provider", cmp1, "--delete")
    assert code == 1 and [r["applied"] for r in dry["removals"]] == [False]
    assert broken.held(broken.web["id"])  # a dry run writes nothing
    code, done = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert code == 0, done
    assert [(r["consumer_uuid"], r["applied"]) for r in done["removals"]] == [
        (broken.web["id"], True)
    ]
    assert broken.held(broken.web["id"]) == {}
    assert run(broken, "audit")[0] == 0
    assert reserve_all(broken, cmp1) == 0


def test_migration_error_is_a_stale_migration_and_a_double_allocation(broken):
    report = fault(broken, "migration-error", server=broken.web["id"], target="cmp-3")
    migration, cmp1 = report["migration"], broken.rp["cmp-1"]
    assert reserve_all(broken, cmp1) == 1
    code, found = run(broken, "audit")
    assert code == 1
    assert classes(found) == {
        broken.web["id"]: "double-allocation",
        migration: "stale-migration",
        broken.db["id"]: "live",
        broken.app["id"]: "live",
    }
    code, done = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert [r["consumer_uuid"] for r in done["removals"]] == [migration]
    assert broken.held(migration) == {}
    assert broken.held(broken.web["id"]) == {broken.rp["cmp-3"]: {"VCPU": 1, **MEM_DISK}}
    assert reserve_all(broken, cmp1) == 0


MEM_DISK = {"MEMORY_MB": 2048, "DISK_GB": 20}


def test_a_hanging_migration_is_in_progress_never_an_orphan(broken):
    report = fault(broken, "migration-hang", server=broken.web["id"])
    migration, cmp1 = report["migration"], broken.rp["cmp-1"]
    dest = report["providers"]["destination"]  # its own server, and web's claim
    assert reserve_all(broken, dest, "VCPU=16:15", "VCPU:allocation_ratio=1") == 1
    code, found = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert code == 0, found
    assert classes(found) == {migration: "migrating"}
    assert found["removals"] == [] and broken.held(migration)
    code, everything = run(broken, "audit")
    assert code == 0 and classes(everything)[broken.web["id"]] == "live"
    # the way out is the abort the explanation recommends
    running = broken.migrations(status="running")[0]
    broken.compute.delete(f"/servers/{broken.web['id']}/migrations/{running['id']}")
    assert reserve_all(broken, dest, "VCPU=16:15", "VCPU:allocation_ratio=1") == 0


def test_service_delete_leaves_a_leaked_host(broken):
    fault(broken, "service-delete", host="cmp-2")
    code, found = run(broken, "audit")
    assert code == 1
    assert classes(found) == {
        broken.db["id"]: "leaked-host",
        broken.web["id"]: "live",
        broken.app["id"]: "live",
    }
    assert found["leaked_providers"] == [broken.rp["cmp-2"]]


def test_a_recreated_service_gets_its_provider_back(broken, caplog):
    old = broken.rp["cmp-2"]
    fault(broken, "service-delete", host="cmp-2")
    new = broken.hosts("cmp-2")[0]["provider_uuid"]  # its provider: a duplicate name
    assert "already exists" in caplog.text and new != old
    code, found = run(broken, "audit")
    assert code == 1 and classes(found)[broken.db["id"]] == "leaked-host"
    assert found["leaked_providers"] == [old]  # the same name, but not the node's uuid
    code, done = run(broken, "audit", "--provider", old, "--delete", "--apply")
    assert code == 0, done
    assert done["deleted_provider"] == old and broken.held(broken.db["id"]) == {}
    broken.compute.post("/os-lab/tracker", {})  # the compute reports its own provider
    assert broken.placement.provider(new)["name"] == "cmp-2"
    assert run(broken, "heal", "--apply")[0] == 0
    assert broken.held(broken.db["id"]) == {new: {"VCPU": 1, **MEM_DISK}}
    assert run(broken, "audit")[0] == 0
    assert reserve_all(broken, new, "VCPU=16:15", "VCPU:allocation_ratio=1") == 0


def test_evacuation_leaves_a_double_allocation_freed_on_the_source(broken):
    fault(broken, "evacuation", server=broken.web["id"], target="cmp-3")
    cmp1, cmp3 = broken.rp["cmp-1"], broken.rp["cmp-3"]
    assert reserve_all(broken, cmp1) == 1
    code, found = run(broken, "audit")
    assert code == 1
    assert classes(found)[broken.web["id"]] == "double-allocation"
    assert [c for c, kind in classes(found).items() if kind != "live"] == [broken.web["id"]]
    # on its host the double allocation is not removable; on the dead source it is
    code, here = run(broken, "audit", "--provider", cmp3, "--delete", "--apply")
    assert code == 1 and here["removals"] == []
    code, done = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert code == 0, done
    assert broken.held(broken.web["id"]) == {cmp3: {"VCPU": 1, **MEM_DISK}}
    assert run(broken, "audit")[0] == 0
    assert reserve_all(broken, cmp1) == 0


def test_apply_needs_delete(broken):
    code, output = run(broken, "audit", "--apply")
    assert code == 2 and "--apply goes with --delete" in output


# ---------------------------------------------------------------- tally explain


def test_explain_a_hanging_migration_recommends_its_abort(broken):
    report = fault(broken, "migration-hang", server=broken.web["id"])
    migration, cmp1 = report["migration"], broken.rp["cmp-1"]
    code, found = run(broken, "explain", cmp1, "--resource", RESERVE_ALL)
    assert code == 1 and found["refused"]
    assert [(h["consumer_uuid"], h["kind"]) for h in found["holders"]] == [(migration, "migrating")]
    running = broken.migrations(status="running")[0]
    commands = [s["command"] for s in found["plan"]]
    abort = f"openstack server migration abort {broken.web['id']} {running['id']}"
    assert commands[0] == abort
    assert any("nova-compute rewrites `reserved`" in s["text"] for s in found["plan"])
    broken.compute.delete(f"/servers/{broken.web['id']}/migrations/{running['id']}")
    assert run(broken, "explain", cmp1, "--resource", RESERVE_ALL)[0] == 1  # web is back
    assert run(broken, "explain", broken.rp["cmp-2"], "--resource", "VCPU=16")[0] == 0


def test_explain_an_orphan_plans_the_audit_delete(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    cmp1 = broken.rp["cmp-1"]
    code, found = run(broken, "explain", "provider", cmp1, "--resource", RESERVE_ALL)
    assert code == 1
    assert [h["kind"] for h in found["holders"]] == ["orphan"]
    assert found["plan"][0]["command"] == f"tally audit --provider {cmp1} --delete --apply"
    assert found["check"]["classes"][-1]["resource_class"] == "VCPU"


def test_explain_prints_a_plan_as_a_table(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    context = Context.for_client(broken.placement)
    context.compute = broken.compute
    args = ["explain", broken.rp["cmp-1"], "--resource", RESERVE_ALL]
    result = CliRunner().invoke(cli, args, obj=context)
    assert result.exit_code == 1
    assert "The plan, in order:" in result.output and "orphan" in result.output


# ---------------------------------------------------------------- tally heal


def test_heal_gives_a_server_its_flavor_on_its_host(broken):
    broken.placement.delete(f"/allocations/{broken.db['id']}")
    code, dry = run(broken, "heal")
    assert code == 1 and [(h["server"], h["action"]) for h in dry["healings"]] == [
        (broken.db["id"], "create")
    ]
    assert broken.held(broken.db["id"]) == {}
    code, done = run(broken, "heal", "--apply")
    assert code == 0 and done["healings"][0]["applied"]
    assert broken.held(broken.db["id"]) == {broken.rp["cmp-2"]: {"VCPU": 1, **MEM_DISK}}
    assert broken.consumer_type(broken.db["id"]) == "INSTANCE"
    assert run(broken, "heal")[1]["healings"] == []


def test_migration_error_is_healed_back_onto_the_source(broken):
    report = fault(broken, "migration-error", server=broken.web["id"], target="cmp-3")
    cmp1 = broken.rp["cmp-1"]
    run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    code, _ = run(broken, "heal", "--instance", broken.web["id"], "--force", "--apply")
    assert code == 0
    assert broken.held(broken.web["id"]) == {cmp1: {"VCPU": 1, **MEM_DISK}}
    assert broken.held(report["migration"]) == {}
    assert run(broken, "audit")[0] == 0


def test_heal_max_count_and_usage(broken):
    for server in (broken.web, broken.db):
        broken.placement.delete(f"/allocations/{server['id']}")
    code, found = run(broken, "heal", "--max-count", "1")
    assert code == 1 and len(found["healings"]) == 1
    assert run(broken, "heal", "--dry-run", "--apply")[0] == 2


# ---------------------------------------------------------------- tally explain candidates


def test_explain_candidates_counts_each_constraint(broken):
    broken.placement.put("/resource_classes/CUSTOM_GPU")
    broken.placement.put("/traits/CUSTOM_FAST")
    code, found = run(broken, "explain", "candidates", "--resource", "VCPU:1,MEMORY_MB:2048")
    assert code == 0 and found["candidates"] == 3 and found["ruled_out"] == {}
    code, found = run(
        broken, "explain", "candidates", "--resource", "VCPU:1,MEMORY_MB:70000,CUSTOM_GPU:1"
    )
    assert code == 1 and found["candidates"] == 0 and found["trees"] == 3
    assert found["ruled_out"] == {"capacity MEMORY_MB": 3, "capacity CUSTOM_GPU": 3}
    assert {m["name"] for m in found["closest"]} == {"cmp-1", "cmp-2", "cmp-3"}
    code, found = run(
        broken, "explain", "candidates", "--resource", "VCPU:1", "--required", "CUSTOM_FAST"
    )
    assert code == 1 and found["ruled_out"] == {"traits": 3}


def test_explain_candidates_rejects_a_bad_request(broken):
    code, output = run(broken, "explain", "candidates", "--resource", "VCPU=four")
    assert code == 2 and "--resource" in output


# ---------------------------------------------------------------- tally drain


def test_drain_dry_run_lists_the_moves(broken):
    code, plan = run(broken, "drain", "cmp-1")
    assert code == 1 and not plan["applied"]
    assert plan["moves"] == [
        {"server": broken.web["id"], "status": "planned", "migration": None, "error": None}
    ]
    assert list(plan["left"]) == [broken.web["id"]]
    assert broken.service("cmp-1")["status"] == "enabled"


def test_drain_moves_everything_off_the_host(broken):
    report = drain.drain(
        broken.placement, broken.compute, "cmp-1", apply=True, wait=lambda: broken.step()
    )
    assert report.drained, report
    assert [(m.server, m.status) for m in report.moves] == [(broken.web["id"], "completed")]
    assert broken.service("cmp-1")["status"] == "disabled"
    assert broken.service("cmp-1")["disabled_reason"] == drain.REASON
    assert broken.provider_consumers(broken.rp["cmp-1"]) == set()
    assert reserve_all(broken, broken.rp["cmp-1"]) == 0


def test_drain_reports_what_a_hung_migration_leaves(broken):
    fault(broken, "migration-hang", server=broken.web["id"])
    report = drain.drain(
        broken.placement, broken.compute, "cmp-1", apply=True, wait=broken.step, timeout=0
    )
    assert not report.drained and report.left


def test_drain_of_an_unknown_host_fails(broken):
    code, output = run(broken, "drain", "cmp-9")
    assert code == 1 and "no nova-compute service on host cmp-9" in output


def test_audit_of_the_destination_sees_the_double_allocation_too(broken):
    report = fault(broken, "migration-error", server=broken.web["id"], target="cmp-3")
    code, found = run(broken, "audit", "--provider", broken.rp["cmp-3"])
    assert code == 1
    assert classes(found) == {broken.web["id"]: "double-allocation", broken.app["id"]: "live"}
    assert report["migration"] not in classes(found)


def test_audit_prints_a_table(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    context = Context.for_client(broken.placement)
    context.compute = broken.compute
    result = CliRunner().invoke(cli, ["audit", "--delete"], obj=context)
    assert result.exit_code == 1
    assert "orphan" in result.output and "cmp-1" in result.output
    assert f"would remove {broken.web['id']}: cmp-1: " in result.output
    assert "3 consumers: 2 live, 1 orphan" in result.output
