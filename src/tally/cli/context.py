"""What every Placement command shares: the connection (the click context object,
built once by the root group from --url/--token/--os-cloud/... or the environment),
error handling (a client's error: its message, exit 1, decided in tally.cli.exits), and
output rendering
(`-f table|json|yaml|value`, `-c COLUMN`, like the openstack client)."""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click
import yaml
from rich.table import Table
from rich.text import Text

from tally.cli.inputs import UUID, Url
from tally.cli.render import console, lines, new_table, show_rows
from tally.clients.compute import ComputeClient
from tally.clients.errors import ClientError
from tally.clients.placement import DEFAULT_URL, NOAUTH_ADMIN_TOKEN, PlacementClient
from tally.escapes import visible
from tally.placement.microversion import NEWEST

FORMATS = ("table", "json", "yaml", "value", "csv")


@dataclasses.dataclass
class Context:
    """The connection settings of one `tally` run; the client is made on first use."""

    url: str | None = None
    token: str | None = None
    cloud: str | None = None
    region: str | None = None
    interface: str | None = None
    version: str | None = None
    compute_url: str | None = None
    compute_version: str | None = None
    client_factory: Callable[[Context], PlacementClient] | None = None
    _client: PlacementClient | None = None
    _compute: ComputeClient | None = None

    @classmethod
    def for_client(cls, client: PlacementClient) -> Context:
        """A context over a ready client (tests, in-process use)."""
        return cls(client_factory=lambda _: client)

    @property
    def client(self) -> PlacementClient:
        if self._client is None:
            self._client = (self.client_factory or connect)(self)
        return self._client

    @property
    def compute(self) -> ComputeClient:
        """The compute API of this run (made on first use; tests may set it)."""
        if self._compute is None:
            self._compute = connect_compute(self)
        return self._compute

    @compute.setter
    def compute(self, client: ComputeClient) -> None:
        self._compute = client


def connect_compute(ctx: Context) -> ComputeClient:
    """--compute-url (env TALLY_COMPUTE_URL) wins; then the catalog of --os-cloud /
    OS_*; then, beside --url, the lab's compute at URL/compute/v2.1. Whether it is
    a compute API is found out on the first request (a one-line error if not)."""
    version = ctx.compute_version
    if ctx.compute_url:
        token = ctx.token or NOAUTH_ADMIN_TOKEN
        return ComputeClient(ctx.compute_url, token=token, version=version)
    if not ctx.url and (ctx.cloud or os.environ.get("OS_AUTH_URL")):
        from tally.clients.cloud import cloud_connection

        found = cloud_connection(
            ctx.cloud, region_name=ctx.region, interface=ctx.interface, service_type="compute"
        )
        return ComputeClient(**found, version=version)
    base = (ctx.url or DEFAULT_URL).rstrip("/")
    if base.endswith("/placement"):  # the lab serves Placement under /placement too
        base = base[: -len("/placement")]
    token = ctx.token or NOAUTH_ADMIN_TOKEN
    return ComputeClient(f"{base}/compute/v2.1", token=token, version=version)


def connect(ctx: Context) -> PlacementClient:
    """--url (noauth token `admin` unless --token) wins; then --os-cloud / OS_CLOUD or
    an OS_AUTH_URL environment through Keystone; else Tally's default address."""
    if ctx.url:
        return PlacementClient(ctx.url, token=ctx.token or NOAUTH_ADMIN_TOKEN, version=ctx.version)
    if ctx.cloud or os.environ.get("OS_AUTH_URL"):
        from tally.clients.cloud import cloud_connection

        found = cloud_connection(ctx.cloud, region_name=ctx.region, interface=ctx.interface)
        return PlacementClient(**found, version=ctx.version)
    return PlacementClient(DEFAULT_URL, token=ctx.token or NOAUTH_ADMIN_TOKEN, version=ctx.version)


class ProviderRef(click.ParamType):
    """A resource provider by uuid, or by its name (looked up once, must be unique)."""

    name = "provider"
    UUID = UUID

    def convert(self, value: Any, param: Any, ctx: click.Context | None) -> str:
        if self.UUID.match(str(value)) or ctx is None:
            return str(value)
        client = ctx.ensure_object(Context).client
        try:
            found = client.get("/resource_providers", {"name": str(value)})["resource_providers"]
        except ClientError as exc:
            self.fail(f"cannot look up a provider named {value!r}: {exc}", param, ctx)
        if len(found) != 1:
            self.fail(f"no resource provider named {value!r} (give its uuid)", param, ctx)
        return found[0]["uuid"]


PROVIDER = ProviderRef()


class Microversion(click.ParamType):
    """`MAJOR.MINOR` (or `latest`), checked before anything is sent."""

    name = "microversion"

    def __init__(self, example: str) -> None:
        self.example = example

    def convert(self, value: Any, param: Any, ctx: click.Context | None) -> str:
        text = str(value).strip()
        if text != "latest" and not re.fullmatch(r"\d+\.\d+", text):
            self.fail(f"{value!r} is not MAJOR.MINOR (like {self.example}) or 'latest'", param, ctx)
        return text


CONNECTION_OPTIONS = (
    click.option(
        "--url", envvar="TALLY_URL", type=Url(), help="Placement endpoint (env TALLY_URL)."
    ),
    click.option(
        "--token",
        envvar="TALLY_TOKEN",
        help="Token sent as x-auth-token with --url (env TALLY_TOKEN; default `admin`, "
        "the noauth admin of Tally and upstream Placement).",
    ),
    click.option(
        "--os-cloud",
        "cloud",
        envvar="OS_CLOUD",
        help="A cloud of clouds.yaml: authenticate with Keystone and find Placement "
        "in the service catalog (env OS_CLOUD; OS_AUTH_URL & co. work too).",
    ),
    click.option("--os-region-name", "region", envvar="OS_REGION_NAME", help="Catalog region."),
    click.option(
        "--os-interface",
        "interface",
        envvar="OS_INTERFACE",
        help="Catalog interface: public, internal or admin.",
    ),
    click.option(
        "--os-placement-api-version",
        "placement_version",  # not `version`: that is --version's
        type=Microversion(NEWEST),
        envvar="OS_PLACEMENT_API_VERSION",
        help="Microversion to speak (env OS_PLACEMENT_API_VERSION); default: the "
        f"highest both this client ({NEWEST}) and the server support.",
    ),
    click.option(
        "--compute-url",
        envvar="TALLY_COMPUTE_URL",
        type=Url(),
        help="Compute API endpoint for the doctor and the lab (env TALLY_COMPUTE_URL); "
        "default: from the catalog with --os-cloud, else URL/compute/v2.1 (the lab's).",
    ),
    click.option(
        "--os-compute-api-version",
        "compute_version",
        type=Microversion("2.53"),
        envvar="OS_COMPUTE_API_VERSION",
        help="Compute microversion (env OS_COMPUTE_API_VERSION); default: the highest "
        "both this client (2.96) and the server support.",
    ),
)


def connection_options(f: Callable) -> Callable:
    for option in reversed(CONNECTION_OPTIONS):
        f = option(f)
    return f


def open_context(ctx: click.Context, **options: Any) -> None:
    """The root group's callback: build the Context unless one was given (tests)."""
    if isinstance(ctx.obj, Context):
        return
    url_from_env = ctx.get_parameter_source("url") == click.core.ParameterSource.ENVIRONMENT
    cloud_from_line = ctx.get_parameter_source("cloud") == click.core.ParameterSource.COMMANDLINE
    if options.get("url") and options.get("cloud") and url_from_env and cloud_from_line:
        options["url"] = None  # --os-cloud on the command line beats TALLY_URL
    ctx.obj = Context(version=options.pop("placement_version", None), **options)


_pass_context = click.make_pass_decorator(Context, ensure=True)


def pass_context(f: Callable) -> Callable:
    """Give the command the Context (a client's error ends it with its message and
    status 1: `tally.cli.exits.deciding`, through the root group)."""
    return _pass_context(f)


# ---------------------------------------------------------------- output


def cell(value: Any) -> str:
    """One value as text for people: a flat mapping `k=v, k=v`, a mapping of mappings
    one `key: ...` line each, a list comma-separated; control characters in what the
    server sent shown escaped (`\\x1b`), never sent to the terminal."""
    if value is None:
        return ""
    if isinstance(value, Mapping):
        if any(isinstance(v, Mapping) for v in value.values()):
            return "\n".join(f"{visible(str(k))}: {cell(v)}" for k, v in value.items())
        return ", ".join(f"{visible(str(k))}={cell(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value)
    return visible(str(value))


def shown(text: str) -> Text:
    """Our own lines of text, quoting what the server sent, for a console: control
    characters escaped in each line, no markup read."""
    return Text("\n".join(visible(line) for line in text.split("\n")))


@dataclasses.dataclass
class Output:
    """How a command prints: the format, the columns asked for (`-c`), and for a
    command with a default column set (`short`), whether `--long` asked for all."""

    fmt: str = "table"
    columns: tuple[str, ...] = ()
    short: tuple[str, ...] = ()
    long: bool = False

    def record(self, data: Mapping[str, Any], fields: Sequence[str] | None = None) -> None:
        """One object: a Field/Value table, or the object as JSON/YAML, or its values
        (a line each), or CSV (a header and one row)."""
        fields = self._pick(fields or list(data), table=False)
        picked = {f: data.get(f) for f in fields}
        if self.fmt == "table":
            table = self.table(["Field", "Value"], prose=["Value"])
            for name, value in picked.items():
                table.add_row(name, lines(cell(value)))
            console().print(table)
        elif self.fmt == "value":
            for value in picked.values():
                click.echo(cell(value))
        elif self.fmt == "csv":
            write_csv(fields, [picked])
        else:
            self.dump(picked)

    def rows(
        self,
        fields: Sequence[str],
        rows: Iterable[Mapping[str, Any]],
        prose: Sequence[str] = (),
        empty: str = "Nothing to show.",
    ) -> None:
        """A list of objects: a table with one row each (records when it does not
        fit the terminal; the sentence `empty` when there is none), or a list as
        JSON/YAML, or one line of space-separated values each, or CSV. In a table,
        only the `prose` columns may wrap (at spaces)."""
        fields = self._pick(fields, table=self.fmt == "table")
        picked = [{f: row.get(f) for f in fields} for row in rows]
        if self.fmt == "table":
            cells = [[cell(v) for v in row.values()] for row in picked]
            show_rows(fields, cells, prose, empty)
        elif self.fmt == "value":
            for row in picked:
                click.echo(" ".join(cell(v) for v in row.values()))
        elif self.fmt == "csv":
            write_csv(fields, picked)
        else:
            self.dump(picked)

    def check_columns(self, known: Sequence[str]) -> None:
        """A usage error (127) for a `-c` that is none of `known`, before anything
        is asked or written."""
        unknown = [c for c in self.columns if c not in known]
        if unknown:
            raise click.UsageError(
                f"unknown column {', '.join(unknown)}; choose from {', '.join(known)}"
            )

    def _pick(self, fields: Sequence[str], table: bool) -> list[str]:
        """`-c`'s columns; else in a table the default set unless --long; else all."""
        self.check_columns(fields)
        if self.columns:
            return list(self.columns)
        if table and self.short and not self.long:
            return [f for f in fields if f in self.short]
        return list(fields)

    def table(self, headers: Sequence[str], prose: Sequence[str] = ()) -> Table:
        return new_table(headers, prose)

    def dump(self, data: Any) -> None:
        if self.fmt == "json":
            click.echo(json.dumps(data, indent=2))
        else:
            click.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), nl=False)


def write_csv(fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """A header line, then a line per row, as the openstack client's `-f csv`:
    numbers bare, text quoted (a mapping or list as its table cell)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    writer.writerow(fields)
    for row in rows:
        writer.writerow([_csv_value(row.get(f)) for f in fields])
    click.echo(buffer.getvalue(), nl=False)


def _csv_value(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return cell(value)
    return value


def output_options(
    f: Callable | None = None,
    *,
    columns: Sequence[str] | None = None,
    short: Sequence[str] = (),
    csv_ok: bool = True,
) -> Callable:
    """Add `-f/--format` and `-c/--column` and pass the command an `out: Output`.
    `columns`: every column the command prints, so that a `-c` naming none of them
    is refused before the command does anything; `short`: the columns of its table
    by default, the others with `--long` (added then) or `-c`; `csv_ok=False` for a
    report that is no list of rows."""

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def run(*args: Any, fmt: str, columns: tuple[str, ...], **kwargs: Any) -> Any:
            out = Output(fmt, columns, tuple(short), kwargs.pop("long", False))
            if known is not None:
                out.check_columns(known)
            return f(*args, out=out, **kwargs)

        run = click.option(
            "-c",
            "--column",
            "columns",
            multiple=True,
            help="Show only this column (repeat for several).",
        )(run)
        if short:
            run = click.option(
                "--long",
                is_flag=True,
                help=f"Every column (the table shows {', '.join(short)} unless -c or --long).",
            )(run)
        return click.option(
            "-f",
            "--format",
            "fmt",
            type=click.Choice(FORMATS if csv_ok else tuple(x for x in FORMATS if x != "csv")),
            default="table",
            show_default=True,
            help="Output format.",
        )(run)

    known = tuple(columns) if columns is not None else None
    return decorate(f) if f is not None else decorate
