"""Every `tally` Placement command, run with click's CliRunner against Tally's app
in-process (PlacementClient over httpx.WSGITransport, a fresh SQLite database).

    compute-1 (RP)  VCPU 32                <- SERVER holds 20 (INSTANCE, project demo)
      numa-0 (CHILD)                          (made by the tests that need a tree)
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

import httpx
import pytest
import yaml
from click.testing import CliRunner, Result

from tally.cli.context import Context
from tally.cli.main import cli
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.placement.app import create_app

RP = "6f0c3b4e-8d3a-4a55-9c2e-0e1f5a7a4d10"
CHILD = "8b2e5d6a-0f5c-4c77-9e4a-2a3b7c9c6f32"
OTHER = "9c3f6e7b-1a6d-4d88-8f5b-3b4c8dad7a43"
SERVER = "2d9d4c1e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
AGG = "11111111-2222-4333-8444-555555555555"
CLAIM = f"--allocation rp={RP},VCPU=20 --project-id demo --user-id alice --consumer-type INSTANCE"

Run = Callable[..., Result]


@pytest.fixture
def make_tally(sqlite_engine) -> Callable[..., Run]:
    """`make_tally(version=None, **settings)` -> run(*args, code=0): invoke the CLI (args,
    or one command line) and check its exit code."""

    def make(version: str | None = None, **settings: object) -> Run:
        app = create_app(Settings.of(**settings), sqlite_engine)
        transport = httpx.WSGITransport(app=app)
        runner = CliRunner()

        def run(*args: str, code: int = 0) -> Result:
            if len(args) == 1:  # one command line: "provider list -f json"
                args = tuple(shlex.split(args[0]))
            client = PlacementClient("http://tally", version=version, transport=transport)
            result = runner.invoke(cli, list(args), obj=Context.for_client(client))
            assert result.exit_code == code, result.output
            return result

        return run

    return make


@pytest.fixture
def tally(make_tally) -> Run:
    return make_tally()


@pytest.fixture
def seeded(tally: Run) -> Run:
    """compute-1 with 32 VCPU, SERVER holding 20."""
    tally("provider", "create", "compute-1", "--uuid", RP)
    tally("provider", "inventory", "set", RP, "--resource", "VCPU=32")
    tally(f"provider allocation set {SERVER} {CLAIM}")
    return tally


def as_json(result: Result):
    return json.loads(result.stdout)


def inventory_of(run: Run, rp: str = RP) -> dict[str, dict]:
    rows = as_json(run("provider", "inventory", "list", rp, "-f", "json"))
    return {row.pop("resource_class"): row for row in rows}


# ---------------------------------------------------------------- providers


def test_provider_create_show_list_set_delete(tally):
    created = as_json(tally("provider", "create", "compute-1", "--uuid", RP, "-f", "json"))
    assert created == {
        "uuid": RP,
        "name": "compute-1",
        "generation": 0,
        "root_provider_uuid": RP,
        "parent_provider_uuid": None,
    }
    tally("provider", "create", "numa-0", "--uuid", CHILD, "--parent-provider", RP)
    tally("provider", "create", "elsewhere", "--uuid", OTHER)

    listed = tally("provider", "list", "-f", "value", "-c", "name").stdout.split()
    assert sorted(listed) == ["compute-1", "elsewhere", "numa-0"]
    in_tree = tally("provider", "list", "--in-tree", CHILD, "-f", "value", "-c", "uuid")
    assert sorted(in_tree.stdout.split()) == sorted([RP, CHILD])
    assert tally("provider", "list", "--name", "numa-0", "-f", "value", "-c", "uuid").stdout == (
        f"{CHILD}\n"
    )

    renamed = as_json(tally("provider", "set", RP, "--name", "compute-one", "-f", "json"))
    assert renamed["name"] == "compute-one"
    moved = as_json(tally("provider", "set", OTHER, "--parent-provider", RP, "-f", "json"))
    assert (moved["name"], moved["parent_provider_uuid"]) == ("elsewhere", RP)
    tally("provider", "set", RP, code=127)  # nothing to change

    refused = tally("provider", "delete", RP, code=1)
    assert "HTTP 409" in refused.stderr
    tally("provider", "delete", OTHER)
    gone = tally("provider", "show", OTHER, code=1)
    assert "HTTP 404" in gone.stderr and OTHER in gone.stderr


def test_provider_create_before_1_20_reads_the_new_provider(make_tally):
    run = make_tally("1.14")
    created = as_json(run("provider", "create", "old-style", "--uuid", RP, "-f", "json"))
    assert (created["uuid"], created["generation"]) == (RP, 0)
    assert "root_provider_uuid" in created


def test_provider_list_filters_by_resources_traits_and_aggregates(seeded):
    seeded("provider", "create", "small", "--uuid", OTHER)
    seeded("provider", "inventory", "set", OTHER, "--resource", "VCPU=4")
    seeded("trait", "create", "CUSTOM_GOLD")
    seeded("provider", "trait", "set", OTHER, "--trait", "CUSTOM_GOLD", "--trait", "HW_CPU_X86_AVX")
    seeded("provider", "aggregate", "set", RP, "--aggregate", AGG)

    def names(*filters: str) -> list[str]:
        found = seeded("provider", "list", *filters, "-f", "value", "-c", "name")
        return sorted(found.stdout.split())

    assert names("--resource", "VCPU=8") == ["compute-1"]  # 12 free on compute-1, 4 on small
    assert names("--resource", "VCPU=4") == ["compute-1", "small"]
    assert names("--required", "CUSTOM_GOLD") == ["small"]
    assert names("--required", "!CUSTOM_GOLD") == ["compute-1"]
    assert names("--forbidden", "CUSTOM_GOLD") == ["compute-1"]
    assert names("--required", "CUSTOM_GOLD,HW_CPU_X86_SSE") == ["small"]  # any of (1.39)
    assert names("--required", "in:HW_CPU_X86_SSE,HW_CPU_X86_SSE2") == []
    assert names("--member-of", AGG) == ["compute-1"]
    assert names("--member-of", f"{AGG},{OTHER}") == ["compute-1"]
    assert names("--member-of", f"!{AGG}") == ["small"]


def test_provider_show_with_allocations(seeded):
    shown = as_json(seeded("provider", "show", RP, "--allocations", "-f", "json"))
    assert shown["allocations"] == {SERVER: {"VCPU": 20}}
    table = seeded("provider", "show", RP, "--allocations").stdout
    assert f"{SERVER}: VCPU=20" in table


# ---------------------------------------------------------------- inventories


def test_inventory_set_forms(tally):
    tally("provider", "create", "compute-1", "--uuid", RP)
    tally(f"provider inventory set {RP} --resource VCPU=32:8 --resource MEMORY_MB=4096")
    assert inventory_of(tally)["VCPU"]["reserved"] == 8
    tally(f"provider inventory set {RP} --amend --resource VCPU:allocation_ratio=16 -f value")
    tally(f"provider inventory set {RP} --amend --resource DISK_GB=100")
    found = inventory_of(tally)
    assert (found["VCPU"]["allocation_ratio"], found["VCPU"]["capacity"]) == (16.0, 384)
    assert set(found) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    # without --amend the classes not given are removed
    tally(f"provider inventory set {RP} --resource VCPU=8 --resource VCPU:max_unit=4")
    found = inventory_of(tally)
    assert list(found) == ["VCPU"]
    assert (found["VCPU"]["total"], found["VCPU"]["max_unit"], found["VCPU"]["reserved"]) == (
        8,
        4,
        0,
    )


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        ("VCPU", "is not CLASS=TOTAL"),
        ("VCPU=lots", "'VCPU=lots': total must be a whole number from 1 to 2147483647"),
        ("VCPU=-4", "'VCPU=-4': total must be a whole number from 1 to 2147483647"),
        ("VCPU=4:-1", "reserved must be a whole number from 0 to 2147483647"),
        ("VCPU=4:5", "VCPU: reserved 5 is more than its total 4"),
        ("VCPU:allocation_ratio=0", "allocation_ratio must be a number above 0"),
        ("VCPU:step_size=0", "step_size must be a whole number from 1"),
        ("vcpu=4", "'vcpu' is not a resource class name (A-Z, 0-9 and _; upper case: VCPU)"),
        ("CUSTOM_NOPE=4", "no resource class CUSTOM_NOPE on this Placement"),
        ("VCPU:colour=3", "unknown inventory field 'colour'"),
        ("VCPU:reserved=2", "no total for VCPU"),
    ],
)
def test_inventory_set_usage_errors_exit_127(tally, resource, message):
    tally("provider", "create", "compute-1", "--uuid", RP)
    result = tally("provider", "inventory", "set", RP, "--resource", resource, code=127)
    assert message in result.stderr


def test_inventory_list_and_show_add_capacity_and_usage(seeded):
    (row,) = as_json(seeded("provider", "inventory", "list", RP, "-f", "json"))
    assert row == {
        "resource_class": "VCPU",
        "allocation_ratio": 1.0,
        "min_unit": 1,
        "max_unit": 2147483647,
        "reserved": 0,
        "step_size": 1,
        "total": 32,
        "capacity": 32,
        "used": 20,
    }
    shown = as_json(seeded("provider", "inventory", "show", RP, "VCPU", "-f", "json"))
    assert (shown["total"], shown["used"], shown["capacity"]) == (32, 20, 32)
    missing = seeded("provider", "inventory", "show", RP, "DISK_GB", code=1)
    assert "HTTP 404" in missing.stderr


def test_the_precheck_refuses_a_shrink_below_usage_and_writes_nothing(seeded):
    before = as_json(seeded("provider", "show", RP, "-f", "json"))["generation"]
    refused = seeded("provider", "inventory", "set", RP, "--resource", "VCPU=32:16", code=1)

    text = refused.stdout
    assert "Refused before writing" in text and "Nothing was written" in text
    assert "| VCPU           | 20   | 16 (total 32, reserved 16) | 4   |" in text
    assert f"| {SERVER} | 20     | INSTANCE | demo    | no " in text
    assert f"tally provider inventory set {RP} --amend --resource VCPU=32:12" in text
    assert f"tally provider allocation unset {SERVER} --provider {RP}" in text
    assert f"tally audit --provider {RP}" in text
    assert "upstream Placement accepts a shrink below usage" in text
    assert as_json(seeded("provider", "show", RP, "-f", "json"))["generation"] == before
    assert inventory_of(seeded)["VCPU"]["reserved"] == 0

    seeded("provider", "inventory", "set", RP, "--resource", "VCPU=32:8")
    assert inventory_of(seeded)["VCPU"]["capacity"] == 24


def test_the_refusal_as_json(seeded):
    refused = seeded(f"provider inventory set {RP} --resource VCPU=16 -f json", code=1)
    report = as_json(refused)
    assert report["ok"] is False
    (vcpu,) = [c for c in report["classes"] if c["refused"]]
    assert (vcpu["used"], vcpu["capacity_asked"], vcpu["gap"]) == (20, 16, 4)
    assert vcpu["holders"][0]["consumer"] == SERVER
    values = seeded(f"provider inventory set {RP} --resource VCPU=16 -f value", code=1)
    assert values.stdout == f"VCPU {SERVER} 20\n"


def test_force_sends_it_and_tallys_409_is_explained_the_same_way(seeded):
    refused = seeded(f"provider inventory set {RP} --resource VCPU=32:16 --force", code=1)
    text = refused.stdout
    assert "The server refused the change" in text
    assert "20 used, new capacity 16" in text  # the server's own words
    assert f"| {SERVER} | 20     | INSTANCE | demo    | no " in text
    assert "VCPU=32:12" in text


def test_against_a_server_that_accepts_the_shrink_only_the_precheck_protects(make_tally):
    upstream_like = make_tally(over_capacity="allow")
    upstream_like("provider", "create", "compute-1", "--uuid", RP)
    upstream_like("provider", "inventory", "set", RP, "--resource", "VCPU=32")
    upstream_like(f"provider allocation set {SERVER} {CLAIM}")
    upstream_like("provider", "inventory", "set", RP, "--resource", "VCPU=16", code=1)
    upstream_like("provider", "inventory", "set", RP, "--resource", "VCPU=16", "--force")
    assert inventory_of(upstream_like)["VCPU"]["total"] == 16


def test_dry_run_checks_and_shows_but_writes_nothing(seeded):
    shown = seeded(f"provider inventory set {RP} --resource VCPU=64 --dry-run -f json")
    assert as_json(shown)[0]["total"] == 64
    assert inventory_of(seeded)["VCPU"]["total"] == 32
    seeded("provider", "inventory", "set", RP, "--resource", "VCPU=8", "--dry-run", code=1)


def test_inventory_delete_is_refused_while_allocated(seeded):
    seeded("provider", "inventory", "set", RP, "--amend", "--resource", "DISK_GB=10")
    refused = seeded("provider", "inventory", "delete", RP, "--resource-class", "VCPU", code=1)
    assert "0 (class removed)" in refused.stdout and SERVER in refused.stdout
    forced = seeded(f"provider inventory delete {RP} --resource-class VCPU --force", code=1)
    assert "the inventory cannot be removed" in forced.stdout
    seeded("provider", "inventory", "delete", RP, "--resource-class", "DISK_GB")
    assert list(inventory_of(seeded)) == ["VCPU"]
    seeded("provider", "inventory", "delete", RP, code=1)  # all: VCPU is still held
    seeded("provider", "allocation", "delete", SERVER)
    seeded("provider", "inventory", "delete", RP)
    assert inventory_of(seeded) == {}


# ---------------------------------------------------------------- allocations and usages


def test_allocation_set_show_unset_keep_the_rest(seeded):
    seeded("provider", "create", "elsewhere", "--uuid", OTHER)
    seeded(f"provider inventory set {OTHER} --resource VCPU=8 --resource MEMORY_MB=2048")
    seeded(
        "provider",
        "allocation",
        "set",
        SERVER,
        "--allocation",
        f"rp={RP},VCPU=20",
        "--allocation",
        f"rp={OTHER},VCPU=2,MEMORY_MB=512",
    )  # project/user/type kept
    rows = as_json(seeded("provider", "allocation", "show", SERVER, "-f", "json"))
    assert {r["resource_provider"]: r["resources"] for r in rows} == {
        RP: {"VCPU": 20},
        OTHER: {"VCPU": 2, "MEMORY_MB": 512},
    }
    assert {(r["project_id"], r["user_id"], r["consumer_type"]) for r in rows} == {
        ("demo", "alice", "INSTANCE")
    }

    left = seeded(
        f"provider allocation unset {SERVER} --provider {OTHER} --resource-class MEMORY_MB -f json"
    )
    assert {r["resource_provider"]: r["resources"] for r in as_json(left)} == {
        RP: {"VCPU": 20},
        OTHER: {"VCPU": 2},
    }
    left = seeded(f"provider allocation unset {SERVER} --provider compute-1 -f json")  # a name
    assert [(r["resource_provider"], r["project_id"]) for r in as_json(left)] == [(OTHER, "demo")]
    left = seeded("provider", "allocation", "unset", SERVER, "-f", "json")
    assert as_json(left) == []
    assert as_json(seeded("provider", "usage", "show", RP, "-f", "json")) == [
        {"resource_class": "VCPU", "usage": 0, "capacity": 32}
    ]


def test_unset_before_1_28_deletes_when_nothing_is_left(seeded, make_tally):
    old = make_tally("1.27")
    old("provider", "allocation", "unset", SERVER, "--resource-class", "VCPU")
    assert as_json(seeded("provider", "allocation", "show", SERVER, "-f", "json")) == []
    make_tally("1.11")("provider", "allocation", "unset", SERVER, code=1)  # needs 1.12


def test_allocation_set_in_the_list_format_before_1_12(seeded, make_tally):
    old = make_tally("1.10")
    old(f"provider allocation set {OTHER} --allocation rp={RP},VCPU=2 --project-id p --user-id u")
    rows = as_json(old("provider", "allocation", "show", OTHER, "-f", "json"))
    assert rows == [{"resource_provider": RP, "generation": 3, "resources": {"VCPU": 2}}]


def test_allocation_set_asks_for_what_the_version_requires(seeded):
    result = seeded(f"provider allocation set {OTHER} --allocation rp={RP},VCPU=1", code=127)
    assert "--project-id, --user-id, --consumer-type" in result.stderr
    bad = seeded("provider", "allocation", "set", OTHER, "--allocation", "VCPU=1", code=127)
    assert "rp=PROVIDER_UUID,CLASS=AMOUNT" in bad.stderr
    over = seeded(
        f"provider allocation set {OTHER} --allocation rp={RP},VCPU=13 --project-id p "
        "--user-id u --consumer-type INSTANCE",
        code=1,
    )
    assert "HTTP 409" in over.stderr


def test_allocation_delete(seeded):
    seeded("provider", "allocation", "delete", SERVER)
    assert as_json(seeded("provider", "allocation", "show", SERVER, "-f", "json")) == []
    assert "HTTP 404" in seeded("provider", "allocation", "delete", SERVER, code=1).stderr


def test_usage_show_per_consumer_type_and_before_1_38(seeded, make_tally):
    rows = as_json(seeded("usage", "show", "--project", "demo", "-f", "json"))
    assert rows == [
        {"consumer_type": "INSTANCE", "consumer_count": 1, "resource_class": "VCPU", "usage": 20}
    ]
    assert (
        as_json(seeded("usage", "show", "--project", "demo", "--user", "bob", "-f", "json")) == []
    )
    migrations = seeded("usage show --project demo --consumer-type MIGRATION -f json")
    assert as_json(migrations) == []
    old = make_tally("1.9")
    assert as_json(old("usage", "show", "--project", "demo", "-f", "json")) == [
        {"resource_class": "VCPU", "usage": 20}
    ]
    make_tally("1.8")("usage", "show", "--project", "demo", code=1)


def test_usage_show_takes_the_project_as_osc_does(seeded):
    """Issue 40, item 11: `openstack resource usage show PROJECT`'s spelling."""
    positional = as_json(seeded("usage", "show", "demo", "-f", "json"))
    assert positional == as_json(seeded("usage", "show", "--project", "demo", "-f", "json"))
    assert positional[0]["usage"] == 20
    assert "give the project once" in seeded("usage show demo --project demo", code=127).stderr
    seeded("usage", "show", code=127)


def test_db_sync_is_upgrade_as_placement_manage_spells_it(tmp_path):
    env = {"TALLY_DATABASE_URL": f"sqlite:///{tmp_path / 'synced.sqlite'}"}
    synced = CliRunner().invoke(cli, ["db", "sync"], env=env)
    assert synced.exit_code == 0, synced.output
    version = CliRunner().invoke(cli, ["db", "version"], env=env).stdout.split()
    assert version[0] == "current" and version[1] == f"{version[3]}," and version[2] == "head"


def test_provider_usage_show(seeded):
    assert seeded("provider", "usage", "show", RP, "-f", "value").stdout == "VCPU 20 32\n"


# ---------------------------------------------------------------- traits, aggregates, classes


def test_traits(seeded):
    seeded("trait", "create", "CUSTOM_GOLD")
    assert seeded("trait", "list", "--name", "startswith:CUSTOM", "-f", "value").stdout == (
        "CUSTOM_GOLD\n"
    )
    assert seeded("trait", "show", "CUSTOM_GOLD", "-f", "value").stdout == "CUSTOM_GOLD\n"
    seeded("trait", "show", "CUSTOM_SILVER", code=1)
    seeded("provider", "trait", "set", RP, "--trait", "CUSTOM_GOLD", "--trait", "HW_CPU_X86_AVX")
    listed = seeded("provider", "trait", "list", RP, "-f", "value").stdout.split()
    assert sorted(listed) == ["CUSTOM_GOLD", "HW_CPU_X86_AVX"]
    assert seeded("trait", "list", "--associated", "-f", "value").stdout.split() == sorted(listed)
    assert "HTTP 409" in seeded("trait", "delete", "CUSTOM_GOLD", code=1).stderr
    seeded("provider", "trait", "delete", RP)
    assert seeded("provider", "trait", "list", RP, "-f", "value").stdout == ""
    seeded("trait", "delete", "CUSTOM_GOLD")
    assert "'GOLD' is not a custom trait name" in seeded("trait", "create", "GOLD", code=127).stderr


def test_aggregates(seeded, make_tally):
    listed = seeded("provider", "aggregate", "set", RP, "--aggregate", AGG, "-f", "value")
    assert listed.stdout == f"{AGG}\n"
    assert seeded("provider", "aggregate", "list", RP, "-f", "value").stdout == f"{AGG}\n"
    stale = seeded("provider", "aggregate", "set", RP, "--generation", "0", code=1)
    assert "placement.concurrent_update" in stale.stderr
    make_tally("1.18")("provider", "aggregate", "set", RP)  # the bare list form
    assert seeded("provider", "aggregate", "list", RP, "-f", "value").stdout == ""


def test_resource_classes(tally):
    tally("resource", "class", "create", "CUSTOM_FPGA")
    assert "CUSTOM_FPGA" in tally("resource", "class", "list", "-f", "value").stdout.split()
    shown = as_json(tally("resource", "class", "show", "CUSTOM_FPGA", "-f", "json"))
    assert shown == {"name": "CUSTOM_FPGA"}
    assert "HTTP 409" in tally("resource", "class", "create", "CUSTOM_FPGA", code=1).stderr
    tally("resource", "class", "delete", "CUSTOM_FPGA")
    tally("resource", "class", "show", "CUSTOM_FPGA", code=1)
    assert "HTTP 400" in tally("resource", "class", "delete", "VCPU", code=1).stderr


# ---------------------------------------------------------------- allocation candidates


def test_allocation_candidates(seeded):
    seeded("provider", "create", "numa-0", "--uuid", CHILD, "--parent-provider", RP)
    seeded("provider", "inventory", "set", CHILD, "--resource", "VCPU=4")
    rows = as_json(seeded("allocation", "candidate", "list", "--resource", "VCPU=8", "-f", "json"))
    assert rows == [
        {
            "#": 1,
            "allocation": {"VCPU": 8},
            "resource provider": RP,
            "inventory used/capacity": {"VCPU": "20/32"},
            "traits": [],
        }
    ]
    grouped = seeded(
        "allocation candidate list --group 1 --resource VCPU=2 --group 2 --resource VCPU=2 "
        "--group-policy isolate -f json"
    )
    by_candidate: dict[int, set[str]] = {}
    for row in as_json(grouped):  # isolate: each group on its own provider of the tree
        by_candidate.setdefault(row["#"], set()).add(row["resource provider"])
    assert by_candidate == {1: {RP, CHILD}, 2: {RP, CHILD}}
    none = seeded("allocation", "candidate", "list", "--resource", "VCPU=64", "-f", "json")
    assert as_json(none) == []
    seeded("allocation", "candidate", "list", code=127)
    seeded(
        "allocation",
        "candidate",
        "list",
        "--group",
        "1",
        "--required",
        "X",
        "--resource",
        "VCPU=1",
        "--group",
        "2",
        "--required",
        "Y",
        code=127,
    )  # group 2 has no --resource


# ---------------------------------------------------------------- output


def test_output_formats_and_columns(seeded):
    assert (
        yaml.safe_load(seeded("provider", "show", RP, "-f", "yaml").stdout)["name"] == "compute-1"
    )
    value = seeded("provider", "show", RP, "-f", "value", "-c", "name", "-c", "generation")
    assert value.stdout == "compute-1\n2\n"
    rows = seeded("provider", "list", "-f", "value", "-c", "generation", "-c", "name")
    assert rows.stdout == "2 compute-1\n"
    table = seeded("provider", "list").stdout
    header = [cell.strip() for cell in table.splitlines()[1].split("|")[1:-1]]
    assert header == ["uuid", "name", "generation", "root_provider_uuid", "parent_provider_uuid"]
    unknown = seeded("provider", "list", "-c", "colour", code=127)
    assert "unknown column colour; choose from uuid, name, generation" in unknown.stderr
