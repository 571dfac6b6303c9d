"""`tally audit`, `heal` and `explain` in-process against the lab, one test per fault
of the seed: the lab breaks it, the audit classifies exactly the affected consumers
(and servers), the fix it names clears it, and the refused change then goes through.
(tests/lab/test_doctor_plans.py runs whole plans literally against a live server.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from tally.cli.context import Context
from tally.cli.main import cli
from tally.clients.errors import PlacementError
from tally.clients.placement import PlacementClient
from tally.doctor import drain

RESERVE_ALL = "VCPU=16:16"  # the seed's change: refused while anything holds VCPU
MEM_DISK = {"MEMORY_MB": 2048, "DISK_GB": 20}
FLAVOR = {"VCPU": 1, **MEM_DISK}
FOUND, ALL_FIXED, BAD_INPUT = 3, 4, 127  # nova-manage's exit codes
PENDING = 5  # a dry run that would write


def context(lab) -> Context:
    found = Context.for_client(lab.placement)
    found.compute = lab.compute
    return found


def run(lab, *args: str) -> tuple[int, Any]:
    """`tally ARGS -f json` in-process against the lab: (exit code, parsed stdout)."""
    result = CliRunner().invoke(cli, [*args, "-f", "json"], obj=context(lab))
    try:
        return result.exit_code, json.loads(result.stdout)
    except ValueError:
        return result.exit_code, result.output + repr(result.exception)


def classes(rows: list[dict]) -> dict[str, str]:
    return {r["consumer"]: r["kind"] for r in rows}


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


def shared_storage(lab) -> str:
    """A sharing provider of DISK_GB (an NFS export, say): its uuid."""
    nfs = lab.placement.post("/resource_providers", {"name": "nfs"}).json()["uuid"]
    lab.placement.put_inventories(nfs, 0, {"DISK_GB": {"total": 1000}})
    shares = {"resource_provider_generation": 1, "traits": ["MISC_SHARES_VIA_AGGREGATE"]}
    lab.placement.put(f"/resource_providers/{nfs}/traits", shares)
    return nfs


def rewrite(lab, consumer: str, held: dict[str, dict[str, int]]) -> None:
    """Replace what an INSTANCE consumer holds, with its generation (a fault by hand)."""
    record = lab.placement.consumer_allocations(consumer)
    lab.placement.put(
        f"/allocations/{consumer}",
        {
            "allocations": {p: {"resources": r} for p, r in held.items()},
            "project_id": record["project_id"],
            "user_id": record["user_id"],
            "consumer_generation": record["consumer_generation"],
            "consumer_type": "INSTANCE",
        },
    )


def test_a_healthy_cloud_is_all_live(broken):
    code, rows = run(broken, "audit", "--verbose")
    assert code == 0, rows
    ids = (broken.web["id"], broken.db["id"], broken.app["id"])
    assert classes(rows) == dict.fromkeys(ids, "live")
    assert run(broken, "audit") == (0, [])  # only findings without --verbose


def test_orphan_of_a_delete_while_down(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    cmp1 = broken.rp["cmp-1"]
    assert reserve_all(broken, cmp1) == 1
    code, rows = run(broken, "audit")
    assert code == FOUND
    assert classes(rows) == {broken.web["id"]: "orphan"}
    assert rows[0]["fix"] == f"tally audit --provider {cmp1} --delete --apply"
    code, dry = run(broken, "audit", "--provider", "cmp-1", "--delete")  # by name too
    assert code == PENDING
    assert dry[0]["action"] == "would free cmp-1: VCPU=1, MEMORY_MB=2048, DISK_GB=20"
    assert broken.held(broken.web["id"])  # a dry run writes nothing
    code, done = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert code == ALL_FIXED, done
    assert done[0]["action"].startswith("freed cmp-1: ")
    assert broken.held(broken.web["id"]) == {}
    assert run(broken, "audit")[0] == 0
    assert reserve_all(broken, cmp1) == 0


def test_an_offloaded_server_still_holding_is_freed(broken):
    """Nova releases everything at a shelve offload; a hold left behind (written back
    by a compute that came back, say) is freed by the audit, and heal leaves it."""
    web, cmp1 = broken.web["id"], broken.rp["cmp-1"]
    broken.action(web, {"shelve": None})
    shelved = broken.server_doc(web)
    assert (shelved["status"], shelved["OS-EXT-SRV-ATTR:host"]) == ("SHELVED_OFFLOADED", None)
    assert broken.held(web) == {}
    assert run(broken, "audit") == (0, [])  # holding nothing is right for it
    broken.placement.put(
        f"/allocations/{web}",
        {
            "allocations": {cmp1: {"resources": FLAVOR}},
            "project_id": "admin",
            "user_id": "admin",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    code, rows = run(broken, "audit")
    assert code == FOUND and classes(rows) == {web: "offloaded"}
    assert rows[0]["fix"] == f"tally audit --provider {cmp1} --delete --apply"
    assert run(broken, "heal") == (4, [])  # nothing for heal: it is not on a host
    code, done = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert code == ALL_FIXED and broken.held(web) == {}
    broken.action(web, {"unshelve": None})
    back = broken.server_doc(web)
    assert back["status"] == "ACTIVE"
    assert broken.held(web) == {broken.rp[back["OS-EXT-SRV-ATTR:host"]]: FLAVOR}
    assert run(broken, "audit") == (0, [])


def test_migration_error_is_misplaced_and_healed_back(broken):
    """The server still runs on its source, accounted on the destination; its failed
    migration holds the source. Heal gives it that hold back in one write."""
    report = fault(broken, "migration-error", server=broken.web["id"], target="cmp-3")
    migration, cmp1, cmp3 = report["migration"], broken.rp["cmp-1"], broken.rp["cmp-3"]
    code, rows = run(broken, "audit")
    assert code == FOUND
    assert classes(rows) == {broken.web["id"]: "misplaced", migration: "stale-migration"}
    assert {r["fix"] for r in rows} == {f"tally heal --instance {broken.web['id']} --apply"}
    # the audit leaves the migration's hold alone: heal takes it back
    code, done = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert code == FOUND and [r["action"] for r in done] == [None, None]
    code, healed = run(broken, "heal", "--instance", broken.web["id"], "--apply")
    assert code == 0 and [(h["action"], h["applied"]) for h in healed] == [("take-back", True)]
    assert broken.held(broken.web["id"]) == {cmp1: FLAVOR}
    assert broken.held(migration) == {}
    assert run(broken, "audit")[0] == 0
    assert reserve_all(broken, cmp3, "VCPU=16:15", "VCPU:allocation_ratio=1") == 0


def test_a_hanging_migration_is_stuck_after_a_while_never_an_orphan(broken):
    report = fault(broken, "migration-hang", server=broken.web["id"])
    migration = report["migration"]
    code, rows = run(broken, "audit", "--verbose")
    assert code == 0 and classes(rows)[migration] == "migrating"
    code, rows = run(broken, "audit", "--stuck-after", "0s")
    assert code == FOUND and classes(rows) == {migration: "stuck-migration"}
    running = broken.migrations(status="running")[0]
    assert rows[0]["fix"] == (
        "openstack --os-compute-api-version 2.24 server migration abort "
        f"{broken.web['id']} {running['id']}"
    )
    broken.compute.delete(f"/servers/{broken.web['id']}/migrations/{running['id']}")
    assert run(broken, "audit", "--stuck-after", "0s")[0] == 0
    assert broken.held(broken.web["id"]) == {broken.rp["cmp-1"]: FLAVOR}


def test_service_delete_leaks_a_provider_that_heal_cannot_fill(broken):
    old = broken.rp["cmp-2"]
    fault(broken, "service-delete", host="cmp-2")
    code, rows = run(broken, "audit")
    assert code == FOUND
    assert classes(rows) == {broken.db["id"]: "leaked-host", old: "leaked-provider"}
    code, dry = run(broken, "audit", "--provider", old, "--delete")
    assert [r["action"] for r in dry] == [
        "would free cmp-2: VCPU=1, MEMORY_MB=2048, DISK_GB=20",
        "would delete provider cmp-2",  # every write of the dry run is listed
    ]
    code, done = run(broken, "audit", "--provider", old, "--delete", "--apply")
    assert code == ALL_FIXED and done[1]["action"] == "deleted provider cmp-2"
    code, rows = run(broken, "audit")
    assert code == FOUND and classes(rows) == {broken.db["id"]: "unallocated"}
    code, stranded = run(broken, "heal")
    assert code == 2 and stranded[0]["action"] == "no-provider"
    assert "compute service was deleted" in stranded[0]["reason"]
    assert "tally lab host add cmp-2" in stranded[0]["reason"]
    new = broken.hosts("cmp-2")[0]["provider_uuid"]
    assert run(broken, "heal", "--apply")[0] == 0
    assert broken.held(broken.db["id"]) == {new: FLAVOR}
    assert run(broken, "audit")[0] == 0


def test_evacuation_leaves_a_double_allocation_freed_on_the_source(broken):
    fault(broken, "evacuation", server=broken.web["id"], target="cmp-3")
    cmp1, cmp3 = broken.rp["cmp-1"], broken.rp["cmp-3"]
    assert reserve_all(broken, cmp1) == 1
    code, rows = run(broken, "audit")
    assert code == FOUND and classes(rows) == {broken.web["id"]: "double-allocation"}
    assert rows[0]["fix"] == f"tally audit --provider {cmp1} --delete --apply"
    # on its host the double allocation is not freed; on the dead source it is
    code, here = run(broken, "audit", "--provider", cmp3, "--delete", "--apply")
    assert code == FOUND and here[0]["action"] is None
    code, done = run(broken, "audit", "--provider", cmp1, "--delete", "--apply")
    assert code == ALL_FIXED, done
    assert broken.held(broken.web["id"]) == {cmp3: FLAVOR}
    assert run(broken, "audit")[0] == 0
    assert reserve_all(broken, cmp1) == 0


def test_bad_input_is_127(broken):
    code, output = run(broken, "audit", "--apply")
    assert code == BAD_INPUT and "--apply goes with --delete" in output
    assert run(broken, "audit", "--stuck-after", "soon")[0] == BAD_INPUT
    assert run(broken, "heal", "--dry-run", "--apply")[0] == BAD_INPUT


def test_columns_work_with_every_format(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    args = ["audit", "-f", "value", "-c", "consumer", "-c", "kind"]
    value = CliRunner().invoke(cli, args, obj=context(broken))
    assert value.exit_code == FOUND
    assert value.stdout == f"{broken.web['id']} orphan\n"  # only values: the summary's on stderr
    assert "3 consumers: 2 live, 1 orphan" in value.stderr
    table = CliRunner().invoke(cli, ["audit", "--delete"], obj=context(broken))
    assert "orphan" in table.stdout and "would free cmp-1: VCPU=1" in table.stdout


def test_an_unreachable_api_is_an_error_not_a_finding():
    lost = Context(url="http://127.0.0.1:9", compute_url="http://127.0.0.1:9/v2.1")
    result = CliRunner().invoke(cli, ["audit"], obj=lost)
    assert result.exit_code == 1 and "cannot reach" in result.stderr


def test_a_placement_only_url_says_where_compute_is_missing(broken):
    lost = Context.for_client(broken.placement)
    lost.compute_url = "http://lab.test/placement"  # Placement, not a compute API
    lost.compute = None  # type: ignore[assignment]
    result = CliRunner().invoke(cli, ["audit"], obj=lost)
    assert result.exit_code == 1


# ---------------------------------------------------------------- tally explain


def test_explain_plans_each_step_on_the_state_it_leaves(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    cmp1 = broken.rp["cmp-1"]
    code, found = run(broken, "explain", cmp1, "--resource", RESERVE_ALL)
    assert code == 1 and [h["kind"] for h in found["holders"]] == ["orphan"]
    steps = found["steps"]
    assert steps[0]["command"] == f"tally audit --provider {cmp1} --delete --apply"
    assert steps[-1]["command"] == (
        f"tally provider inventory set {cmp1} --amend --resource VCPU:total=16 "
        "--resource VCPU:reserved=16"
    )
    assert [s["usage_after"]["VCPU"] for s in steps] == [0, 0]  # the orphan was all of it
    assert [a["command"].split()[-1] for a in found["alternatives"]] == ["VCPU=16:15"]


def test_explain_forecasts_what_heal_writes_with_shared_disk(broken):
    """web runs on cmp-1 but is accounted on cmp-2, its disk on shared storage: heal
    gives cmp-1 its VCPU and MEMORY_MB only, and explain's step says so."""
    web, cmp1 = broken.web["id"], broken.rp["cmp-1"]
    broken.boot("other", availability_zone="nova:cmp-1")  # holds cmp-1: the change is refused
    nfs = shared_storage(broken)
    rewrite(broken, web, {broken.rp["cmp-2"]: {"VCPU": 1, "MEMORY_MB": 2048}, nfs: {"DISK_GB": 20}})
    code, found = run(broken, "explain", cmp1, "--resource", "VCPU=16:16")
    heal_step = next(s for s in found["steps"] if s["command"].startswith("tally heal"))
    # other's flavor and web's VCPU and MEMORY_MB: no DISK_GB of web's here
    assert heal_step["usage_after"] == {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 20}
    assert run(broken, "heal", "--instance", web, "--apply")[0] == 0
    assert broken.placement.usages(cmp1) == heal_step["usage_after"]  # what it forecast
    assert broken.held(web) == {cmp1: {"VCPU": 1, "MEMORY_MB": 2048}, nfs: {"DISK_GB": 20}}


def test_explain_drains_when_live_servers_alone_hold_too_much(broken):
    code, found = run(broken, "explain", "cmp-2", "--resource", RESERVE_ALL)
    assert code == 1 and [h["kind"] for h in found["holders"]] == ["live"]
    commands = [s["command"] for s in found["steps"]]
    assert commands[0] == "tally drain cmp-2 --apply" and len(commands) == 2


def test_explain_prints_the_plan(broken):
    fault(broken, "delete-while-down", server=broken.web["id"])
    args = ["explain", broken.rp["cmp-1"], "--resource", RESERVE_ALL]
    result = CliRunner().invoke(cli, args, obj=context(broken))
    assert result.exit_code == 1
    assert "The way out, in order" in result.stdout and "orphan" in result.stdout
    assert "Or, changing the request: reserve at most 15 VCPU" in result.stdout


# ---------------------------------------------------------------- tally heal


def test_heal_gives_a_server_its_flavor_on_its_host(broken):
    broken.placement.delete(f"/allocations/{broken.db['id']}")
    code, dry = run(broken, "heal")
    assert code == PENDING
    assert [(h["server"], h["action"]) for h in dry] == [(broken.db["id"], "create")]
    assert broken.held(broken.db["id"]) == {}
    code, done = run(broken, "heal", "--apply")
    assert code == 0 and done[0]["applied"]
    assert broken.held(broken.db["id"]) == {broken.rp["cmp-2"]: FLAVOR}
    assert broken.consumer_type(broken.db["id"]) == "INSTANCE"
    assert run(broken, "heal") == (4, [])  # nothing to heal


def test_heal_gives_a_server_booted_from_a_volume_no_root_disk(broken):
    root_volume = [{"boot_index": 0, "source_type": "image", "destination_type": "volume"}]
    server = broken.boot("vol", block_device_mapping_v2=root_volume, availability_zone="nova:cmp-1")
    claimed = broken.held(server["id"])
    assert claimed == {broken.rp["cmp-1"]: {"VCPU": 1, "MEMORY_MB": 2048}}
    broken.placement.delete(f"/allocations/{server['id']}")
    code, dry = run(broken, "heal", "--instance", server["id"])
    assert code == PENDING and dry[0]["allocations"] == claimed  # as Nova's heal_allocations
    code, done = run(broken, "heal", "--instance", server["id"], "--apply")
    assert code == 0 and done[0]["applied"]
    assert broken.held(server["id"]) == claimed


def test_heal_gives_a_pinned_server_pcpu(broken):
    """A flavor with hw:cpu_policy=dedicated claims PCPU (a host with cpu_dedicated_set
    reports it); healed with VCPU, its pinned CPUs would be free for the next one."""
    rp = broken.rp["cmp-1"]
    found = broken.placement.inventories(rp)
    pcpu = {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8, "step_size": 1}
    inventories = {**found["inventories"], "PCPU": {**pcpu, "allocation_ratio": 1.0}}
    broken.placement.put_inventories(rp, found["resource_provider_generation"], inventories)
    broken.flavor("pinned", vcpus=2, ram=1024, disk=5, extra_specs={"hw:cpu_policy": "dedicated"})
    server = broken.boot("nfv", "pinned", availability_zone="nova:cmp-1")
    claimed = broken.held(server["id"])
    assert claimed == {rp: {"PCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 5}}
    broken.placement.delete(f"/allocations/{server['id']}")
    code, done = run(broken, "heal", "--instance", server["id"], "--apply")
    assert code == 0 and done[0]["allocations"] == claimed and done[0]["applied"]
    assert broken.held(server["id"]) == claimed


def test_heal_force_keeps_child_and_shared_parts(broken):
    """A rewrite from the flavor keeps a vGPU on a child provider and disk on shared
    storage: the flavor rule cannot place them, and dropping them frees what is used."""
    api, rp, server = broken.placement, broken.rp["cmp-2"], broken.db["id"]
    gpu = api.post("/resource_providers", {"name": "cmp-2-gpu", "parent_provider_uuid": rp}).json()
    api.put_inventories(gpu["uuid"], 0, {"VGPU": {"total": 4}})
    nfs = shared_storage(broken)
    held = {rp: {"VCPU": 1, "MEMORY_MB": 2048}, gpu["uuid"]: {"VGPU": 1}, nfs: {"DISK_GB": 20}}
    rewrite(broken, server, held)
    code, done = run(broken, "heal", "--instance", server, "--force", "--apply")
    assert code == 0 and done[0]["action"] == "replace" and done[0]["applied"]
    assert broken.held(server) == held  # not VCPU, MEMORY_MB and DISK_GB 20 on cmp-2 alone


def test_heal_max_count(broken):
    for server in (broken.web, broken.db):
        broken.placement.delete(f"/allocations/{server['id']}")
    code, found = run(broken, "heal", "--max-count", "1")
    assert code == 1 and len(found) == 1


# ---------------------------------------------------------------- tally explain candidates


def _ruled(found: dict) -> dict[str, int]:
    return {c["constraint"]: c["rules_out"] for c in found["constraints"]}


def test_explain_candidates_counts_each_constraint(broken):
    broken.placement.put("/resource_classes/CUSTOM_GPU")
    broken.placement.put("/traits/CUSTOM_FAST")
    code, found = run(broken, "explain", "candidates", "--resource", "VCPU:1,MEMORY_MB:2048")
    assert code == 0 and found["candidates"] == 3 and found["fits"] == 3
    assert _ruled(found) == {"resources=VCPU:1": 0, "resources=MEMORY_MB:2048": 0}
    code, found = run(
        broken, "explain", "candidates", "--resource", "VCPU:1,MEMORY_MB:70000,CUSTOM_GPU:1"
    )
    assert code == 1 and found["candidates"] == 0 and found["trees"] == 3
    assert _ruled(found) == {
        "resources=VCPU:1": 0,
        "resources=MEMORY_MB:70000": 3,
        "resources=CUSTOM_GPU:1": 3,
    }
    assert {m["name"] for m in found["closest"]} == {"cmp-1", "cmp-2", "cmp-3"}
    code, found = run(
        broken, "explain", "candidates", "--resource", "VCPU:1", "--required", "CUSTOM_FAST"
    )
    assert code == 1 and _ruled(found)["required=CUSTOM_FAST"] == 3


def test_explain_candidates_takes_granular_groups_as_osc_spells_them(broken):
    """The options after `--group NAME` are that group's; the others the unsuffixed one's."""
    args = ["explain", "candidates", "--resource", "VCPU:1", "--group", "1"]
    args += ["--resource", "MEMORY_MB:70000", "--forbidden", "CUSTOM_SLOW", "--group", "2"]
    args += ["--resource", "VCPU=1", "--group-policy", "isolate"]
    broken.placement.put("/traits/CUSTOM_SLOW")
    code, found = run(broken, *args)
    assert code == 1
    assert _ruled(found) == {
        "resources=VCPU:1": 0,
        "resources1=MEMORY_MB:70000": 3,
        "required1=!CUSTOM_SLOW": 0,
        "resources2=VCPU:1": 0,
        "group_policy=isolate": 0,
    }


def test_explain_candidates_over_a_placement_without_tallys_api(broken, monkeypatch):
    """Upstream Placement has no /tally/v1/allocation_candidates/why: the CLI judges
    the unsuffixed group over the public API, and says what it cannot."""

    def missing(self, params):  # noqa: ANN001, ARG001
        raise PlacementError("GET", "/tally/v1/allocation_candidates/why", 404, "Not Found")

    monkeypatch.setattr(PlacementClient, "why", missing)
    code, found = run(broken, "explain", "candidates", "--resource", "VCPU:1,MEMORY_MB:70000")
    assert code == 1 and found["candidates"] == 0 and found["trees"] == 3
    assert _ruled(found) == {"capacity MEMORY_MB": 3}
    code, output = run(broken, "explain", "candidates", "--group", "1", "--resource", "VCPU:1")
    assert code != 0 and "needs Tally's" in output


def test_explain_candidates_rejects_a_bad_request(broken):
    code, output = run(broken, "explain", "candidates", "--resource", "VCPU=four")
    assert code == 127 and "--resource" in output


# ---------------------------------------------------------------- tally drain


def test_drain_dry_run_lists_the_moves(broken):
    code, plan = run(broken, "drain", "cmp-1")
    assert code == PENDING and not plan["applied"]  # the plan holds; nothing written
    assert plan["moves"] == [
        {
            "server": broken.web["id"],
            "status": "planned",
            "migration": None,
            "error": None,
            "target": "cmp-2",  # room for it, most free memory first (app is on cmp-3)
        }
    ]
    assert plan["left"] == {}  # nothing stays behind
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


def test_drain_of_an_unknown_host_is_bad_input_as_heal_of_an_unknown_server(broken):
    code, output = run(broken, "drain", "cmp-9")
    assert code == 127 and output.startswith("Error: no compute host cmp-9 in the compute API\n")
    code, output = run(broken, "heal", "--instance", "vm-9")
    errors = [line for line in output.splitlines() if not line.startswith("heal: ")]
    assert code == 127 and errors[0] == "Error: no server vm-9 in the compute API", output
