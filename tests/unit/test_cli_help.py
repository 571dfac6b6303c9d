"""`--help` of every `tally` command is complete; the connection options and the
environment reach the client."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tally.cli.context import Context, connect
from tally.cli.main import cli


def commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield prefix + (name,), command
        if isinstance(command, click.Group):
            yield from commands(command, prefix + (name,))


ALL = list(commands(cli))


def test_the_placement_commands_mirror_osc_placement():
    paths = {" ".join(path) for path, command in ALL if not isinstance(command, click.Group)}
    assert {
        "provider list", "provider show", "provider create", "provider set", "provider delete",
        "provider inventory list", "provider inventory show", "provider inventory set",
        "provider inventory delete", "provider usage show", "provider trait list",
        "provider trait set", "provider trait delete", "provider aggregate list",
        "provider aggregate set", "provider allocation show", "provider allocation set",
        "provider allocation unset", "provider allocation delete", "resource class list",
        "resource class show", "resource class create", "resource class delete", "trait list",
        "trait show", "trait create", "trait delete", "usage show", "allocation candidate list",
    } <= paths  # fmt: skip


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in ALL])
def test_help_is_complete(path):
    command = dict((" ".join(p), c) for p, c in ALL)[path]
    result = CliRunner().invoke(cli, [*path.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert command.help and command.help.strip(), f"{path} has no description"
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"{path} {param.opts[0]} has no help"
        elif isinstance(param, click.Argument):
            assert param.human_readable_name in command.help, f"{path}: {param.name} undescribed"


def test_inventory_help_says_the_precheck_keeps_you_safe_against_upstream():
    result = CliRunner().invoke(cli, ["provider", "inventory", "set", "--help"])
    text = " ".join(result.output.split())
    assert "upstream Placement accepts a shrink below usage" in text
    assert "against upstream, the check is what keeps you safe" in text
    assert "VCPU=32:8" in text and "VCPU:reserved=8" in text and "--amend" in text


def test_connection_options_come_from_the_environment(monkeypatch):
    seen: list[Context] = []

    @cli.command("probe-connection", hidden=True)
    @click.pass_obj
    def probe(obj: Context) -> None:
        seen.append(obj)

    try:
        env = {
            "TALLY_URL": "http://placement.example:8778",
            "TALLY_TOKEN": "s3cret",
            "OS_PLACEMENT_API_VERSION": "1.28",
            "OS_REGION_NAME": "RegionTwo",
            "OS_INTERFACE": "internal",
        }
        assert CliRunner().invoke(cli, ["probe-connection"], env=env).exit_code == 0
        ctx = seen[-1]
        assert (ctx.url, ctx.token, ctx.version) == (
            "http://placement.example:8778",
            "s3cret",
            "1.28",
        )
        assert (ctx.region, ctx.interface) == ("RegionTwo", "internal")
        client = connect(ctx)
        assert (client.base_url, client.version) == ("http://placement.example:8778", "1.28")
        assert client._http.headers["x-auth-token"] == "s3cret"

        # --os-cloud on the command line beats TALLY_URL from the environment
        env["OS_CLOUD"] = "ignored"
        result = CliRunner().invoke(cli, ["--os-cloud", "prod", "probe-connection"], env=env)
        assert result.exit_code == 0
        assert (seen[-1].url, seen[-1].cloud) == (None, "prod")
    finally:
        cli.commands.pop("probe-connection")


def test_without_settings_the_client_goes_to_the_local_tally(monkeypatch):
    for name in ("TALLY_URL", "OS_CLOUD", "OS_AUTH_URL"):
        monkeypatch.delenv(name, raising=False)
    client = connect(Context(version="1.39"))
    assert client.base_url == "http://127.0.0.1:8778"
    assert client._http.headers["x-auth-token"] == "admin"


def test_an_unreachable_server_is_exit_1_with_the_reason():
    result = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "provider", "list"])
    assert result.exit_code == 1
    assert "cannot reach Placement at http://127.0.0.1:9" in result.stderr
