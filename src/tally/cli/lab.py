"""`tally lab ...`: drive the lab cloud of a running `tally serve` through its compute
API (`--url` is the Tally server; compute is at URL/compute/v2.1, or the global
`--compute-url`; `--os-cloud` finds it in the catalog)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from tally.cli import exits
from tally.cli.context import Context, Output, output_options, pass_context
from tally.clients.compute import ComputeClient

FAULTS = ("delete-while-down", "migration-error", "migration-hang", "service-delete", "evacuation")
DEMO_FLAVORS = (  # id, name, vcpus, ram (MB), disk (GB)
    ("1", "m1.tiny", 1, 512, 1),
    ("2", "m1.small", 1, 2048, 20),
    ("3", "m1.medium", 2, 4096, 40),
    ("4", "m1.large", 4, 8192, 80),
)
SERVER_FIELDS = ("id", "name", "status", "host", "task_state")
MIGRATION_FIELDS = (
    "id",
    "uuid",
    "migration_type",
    "status",
    "instance_uuid",
    "source_compute",
    "dest_compute",
)
HOST_FIELDS = (
    "name",
    "provider_uuid",
    "vcpus",
    "memory_mb",
    "disk_gb",
    "reserved_vcpus",
    "reserved_memory_mb",
    "reserved_disk_gb",
    "disabled",
    "forced_down",
)
HOST_OPTIONS = (  # option, setting, type
    ("--vcpus", "vcpus", int),
    ("--memory-mb", "memory_mb", int),
    ("--disk-gb", "disk_gb", int),
    ("--cpu-ratio", "cpu_allocation_ratio", float),
    ("--ram-ratio", "ram_allocation_ratio", float),
    ("--disk-ratio", "disk_allocation_ratio", float),
    ("--reserved-vcpus", "reserved_vcpus", int),
    ("--reserved-memory-mb", "reserved_memory_mb", int),
    ("--reserved-disk-gb", "reserved_disk_gb", int),
)


def compute(ctx: Context) -> ComputeClient:
    """The compute client of this run (see `Context.compute`)."""
    return ctx.compute


def host_options(f: Callable) -> Callable:
    for option, setting, kind in reversed(HOST_OPTIONS):
        f = click.option(option, setting, type=kind, help=f"Host setting {setting}.")(f)
    return f


def server_row(server: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": server["id"],
        "name": server["name"],
        "status": server["status"],
        "host": server.get("OS-EXT-SRV-ATTR:host"),
        "task_state": server.get("OS-EXT-STS:task_state"),
    }


@click.group()
def lab() -> None:
    """The lab cloud: compute hosts, servers, moves and faults on demand."""


@lab.command("up")
@click.option("--hosts", default=3, show_default=True, help="Compute hosts lab-compute-N.")
@click.option("--servers", default=6, show_default=True, help="Servers demo-N to boot.")
@click.option("--flavor", default="m1.small", show_default=True, help="Flavor of the servers.")
@output_options
@pass_context
def up(ctx: Context, out: Output, hosts: int, servers: int, flavor: str) -> None:
    """Make a small demo cloud (flavors, hosts, servers) and print its clouds.yaml."""
    client = compute(ctx)
    have = {f["name"] for f in client.get("/flavors")["flavors"]}
    for ident, name, vcpus, ram, disk in DEMO_FLAVORS:
        if name not in have:
            client.post(
                "/flavors",
                {"flavor": {"id": ident, "name": name, "vcpus": vcpus, "ram": ram, "disk": disk}},
            )
    known = {h["name"] for h in client.get("/os-lab/hosts")["hosts"]}
    wanted = [{"name": f"lab-compute-{n}"} for n in range(1, hosts + 1)]
    if [w for w in wanted if w["name"] not in known]:
        client.post("/os-lab/hosts", {"hosts": [w for w in wanted if w["name"] not in known]})
    existing = len(client.get("/servers", {"all_tenants": "1"})["servers"])
    if servers > existing:
        client.post(
            "/servers",
            {
                "server": {
                    "name": "demo",
                    "flavorRef": flavor,
                    "min_count": servers - existing,
                    "max_count": servers - existing,
                }
            },
        )
    summary = client.get("/os-lab")["lab"]
    if out.fmt == "table":
        click.echo(f"Lab up: {summary['hosts']} hosts, {summary['servers']} servers.")
        click.echo("clouds.yaml (then: openstack --os-cloud tally-lab server list):\n")
        click.echo(summary["clouds_yaml"])
    else:
        out.record(summary)


@lab.command("status")
@output_options
@pass_context
def status(ctx: Context, out: Output) -> None:
    """Counts of hosts, servers and migrations by status."""
    summary = compute(ctx).get("/os-lab")["lab"]
    out.record(
        summary, ["hosts", "hosts_down", "hosts_disabled", "servers", "migrations", "placement"]
    )


@lab.command("clouds")
@pass_context
def clouds(ctx: Context) -> None:
    """Print the clouds.yaml that reaches the lab (cloud `tally-lab`)."""
    click.echo(compute(ctx).get("/os-lab")["lab"]["clouds_yaml"], nl=False)


@lab.group("host")
def host() -> None:
    """Compute hosts of the lab (each a nova-compute service with its provider)."""


@host.command("add")
@click.argument("names", nargs=-1, required=True)
@click.option("--count", type=int, help="Add NAME-1..NAME-COUNT for the one NAME given.")
@host_options
@output_options
@pass_context
def host_add(ctx: Context, out: Output, names: tuple[str, ...], count: int | None, **config):
    """Add compute hosts NAMES...; each reports its inventory to Placement at once."""
    if count:
        if len(names) != 1:
            raise click.UsageError("--count takes exactly one NAME prefix")
        names = tuple(f"{names[0]}-{n}" for n in range(1, count + 1))
    settings = {k: v for k, v in config.items() if v is not None}
    found = compute(ctx).post("/os-lab/hosts", {"hosts": [{"name": n, **settings} for n in names]})
    out.rows(HOST_FIELDS, found["hosts"])


@host.command("list")
@output_options
@pass_context
def host_list(ctx: Context, out: Output) -> None:
    """The hosts and their configuration (what the resource tracker reports)."""
    out.rows(HOST_FIELDS, compute(ctx).get("/os-lab/hosts")["hosts"])


@host.command("set")
@click.argument("name")
@host_options
@output_options
@pass_context
def host_set(ctx: Context, out: Output, name: str, **config: Any) -> None:
    """Change the configuration of host NAME; its resource tracker reports it
    (overwriting `reserved` in Placement, as nova-compute does)."""
    changes = {k: v for k, v in config.items() if v is not None}
    if not changes:
        raise click.UsageError("nothing to change")
    out.record(compute(ctx).put(f"/os-lab/hosts/{name}", {"host": changes})["host"], HOST_FIELDS)


@lab.command("boot")
@click.argument("name")
@click.option("--flavor", default="m1.small", show_default=True, help="Flavor id or name.")
@click.option("--count", default=1, show_default=True, help="How many (NAME-1..NAME-COUNT).")
@click.option("--host", help="Force this compute host (admin).")
@click.option("--image", default="", help="Image reference recorded on the server.")
@click.option(
    "--boot-from-volume",
    "volume_gb",
    type=click.IntRange(min=1),
    help="Root disk on a new volume of this many GB (as `openstack server create "
    "--boot-from-volume`): no DISK_GB is claimed for it.",
)
@output_options
@pass_context
def boot(
    ctx: Context,
    out: Output,
    name: str,
    flavor: str,
    count: int,
    host: str | None,
    image: str,
    volume_gb: int | None,
) -> None:
    """Boot servers called NAME (scheduled and claimed in Placement; ERROR when no host fits)."""
    client = compute(ctx)
    spec: dict[str, Any] = {
        "name": name,
        "flavorRef": flavor,
        "imageRef": image,
        "min_count": count,
        "max_count": count,
        "return_reservation_id": True,
    }
    if volume_gb:  # the image goes into the volume; the server itself has none
        root = {"boot_index": 0, "source_type": "image", "destination_type": "volume"}
        spec["block_device_mapping_v2"] = [
            {**root, "uuid": image, "volume_size": volume_gb, "delete_on_termination": True}
        ]
        del spec["imageRef"]
    if host:
        spec["availability_zone"] = f"nova:{host}"
    reservation = client.post("/servers", {"server": spec})["reservation_id"]
    found = client.get("/servers/detail", {"all_tenants": "1", "reservation_id": reservation})
    servers = sorted(found["servers"], key=lambda s: s.get("OS-EXT-SRV-ATTR:launch_index", 0))
    out.rows(SERVER_FIELDS, [server_row(s) for s in servers])
    if any(s["status"] == "ERROR" for s in servers):
        exits.leave(exits.FAILED)


@lab.command("migrate")
@click.argument("server")
@click.option("--cold", is_flag=True, help="Cold migration (migrate) instead of live.")
@click.option("--host", help="Destination host (default: the scheduler picks).")
@output_options
@pass_context
def migrate(ctx: Context, out: Output, server: str, cold: bool, host: str | None) -> None:
    """Move server SERVER; the migration then advances with the lab's steps."""
    client = compute(ctx)
    if cold and host and not client.at_least("2.56"):
        raise click.ClickException(
            f"--host with --cold needs compute 2.56 (this is {client.version})"
        )
    if cold:
        action: dict[str, Any] = {"migrate": {"host": host} if host else None}
    elif client.at_least("2.25"):
        action = {"os-migrateLive": {"host": host, "block_migration": "auto"}}
    else:  # both flags required before 2.25, and no "auto"
        action = {
            "os-migrateLive": {"host": host, "block_migration": False, "disk_over_commit": False}
        }
    client.post(f"/servers/{server}/action", action)
    found = client.get("/os-migrations", {"instance_uuid": server})["migrations"]
    newest = max(found, key=lambda m: m["id"])  # the order is Nova's to choose
    out.record(newest, MIGRATION_FIELDS)
    if newest["status"] == "error":
        exits.leave(exits.FAILED)


@lab.command("step")
@click.option("--count", default=1, show_default=True, help="States to advance.")
@output_options
@pass_context
def step(ctx: Context, out: Output, count: int) -> None:
    """Advance every unfinished migration (not a hung one) by COUNT states."""
    found = compute(ctx).post("/os-lab/step", {"count": count})["migrations"]
    out.rows(MIGRATION_FIELDS, found)


@lab.command("tracker")
@click.option("--host", help="Only this host (default: all).")
@output_options
@pass_context
def tracker(ctx: Context, out: Output, host: str | None) -> None:
    """Run the resource tracker now: each host reports its inventory to Placement."""
    found = compute(ctx).post("/os-lab/tracker", {"host": host} if host else {})["reports"]
    out.rows(("host", "provider", "inventory_written", "error"), found)


BREAK_FIELDS = ("kind", "server", "migration", "migration_status", "host", "providers")
BREAK_COLUMNS = (*BREAK_FIELDS, "held")  # held: the consumers left holding allocations


@lab.command("break")
@click.argument("kind", type=click.Choice(FAULTS))
@click.option(
    "--server", help="The server to break (default: the oldest not yet involved in a fault)."
)
@click.option("--host", help="The host (service-delete) or where to pick the server.")
@click.option("--target", help="Destination host of the move (migration-*, evacuation).")
@output_options(columns=BREAK_COLUMNS)
@pass_context
def break_(
    ctx: Context, out: Output, kind: str, server: str | None, host: str | None, target: str | None
) -> None:
    """Inject one fault of KIND, leaving in Placement the traces the real failure
    leaves; the columns: kind, server, migration, migration_status, host, providers
    (source, destination) and held (the consumers left holding allocations)."""
    spec = {"kind": kind, "server": server, "host": host, "target": target}
    report = compute(ctx).post("/os-lab/faults", {"fault": spec})["fault"]
    if out.fmt != "table" or out.columns:
        out.record(report, BREAK_COLUMNS)
        return
    out.record(report, BREAK_FIELDS)
    click.echo("Consumers left holding allocations:")
    out.rows(("consumer", "consumer_type", "allocations"), report["held"], empty="None.")


@lab.command("reset")
@output_options
@pass_context
def reset(ctx: Context, out: Output) -> None:
    """Empty the lab (servers, migrations, hosts, flavors) and remove its allocations and
    providers from Placement; `tally lab up` builds it again."""
    done = compute(ctx).post("/os-lab/reset")["reset"]
    if out.fmt != "table":
        out.record(done)
        return
    click.echo(
        f"Lab reset: removed {done['servers']} servers, {done['migrations']} migrations, "
        f"{done['hosts']} hosts and {done['flavors']} flavors; in Placement, released "
        f"{len(done['consumers_released'])} consumers and deleted "
        f"{len(done['providers_deleted'])} resource providers."
    )
