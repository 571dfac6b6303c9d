"""The root's connection options are global: before the command or after it, as the
openstack client takes `--os-*` (issue 29: `--os-placement-api-version` collided with
`--version` and was refused everywhere)."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from tally.cli import context
from tally.cli.main import cli
from tally.clients.placement import PlacementClient
from tally.config import Settings
from tally.placement.app import create_app


@pytest.fixture
def spoken(sqlite_engine, monkeypatch) -> list[str]:
    """The microversion each run's client speaks; the client reaches Tally in-process."""
    app = create_app(Settings.of(), sqlite_engine)
    seen: list[str] = []

    def connect(ctx: context.Context) -> PlacementClient:
        seen.append(ctx.version)
        transport = httpx.WSGITransport(app=app)
        return PlacementClient("http://tally", version=ctx.version, transport=transport)

    monkeypatch.setattr(context, "connect", connect)
    monkeypatch.delenv("OS_PLACEMENT_API_VERSION", raising=False)
    return seen


def listed(*args: str, env: dict[str, str] | None = None) -> list[dict]:
    result = CliRunner().invoke(cli, [*args], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["--os-placement-api-version", "1.10", "provider", "list", "-f", "json"],
        ["provider", "list", "--os-placement-api-version", "1.10", "-f", "json"],
        ["provider", "list", "-f", "json", "--os-placement-api-version=1.10"],
        [
            "--os-placement-api-version",
            "1.39",
            "provider",
            "list",
            "-f",
            "json",
            "--os-placement-api-version",
            "1.10",
        ],  # fmt: skip
    ],
)
def test_the_placement_version_before_or_after_the_command(spoken, args):
    CliRunner().invoke(cli, ["provider", "create", "cn-1"], catch_exceptions=False)
    (latest,) = listed("provider", "list", "-f", "json")
    assert spoken[-1] is None and "root_provider_uuid" in latest
    at_1_10 = listed(*args)
    assert spoken[-1] == "1.10"  # at 1.10 no root or parent provider in the answer
    assert at_1_10 == [{"uuid": latest["uuid"], "name": "cn-1", "generation": 0}]


def test_the_environment_still_sets_it(spoken):
    listed("provider", "list", "-f", "json", env={"OS_PLACEMENT_API_VERSION": "1.10"})
    assert spoken == ["1.10"]
    listed("provider", "list", "-f", "json", "--os-placement-api-version", "1.20",
           env={"OS_PLACEMENT_API_VERSION": "1.10"})  # fmt: skip
    assert spoken[-1] == "1.20"  # the command line beats the environment


def test_a_version_that_is_not_major_minor_is_refused_before_anything_is_sent(spoken):
    result = CliRunner().invoke(cli, ["provider", "list", "--os-placement-api-version", "1.x"])
    assert result.exit_code != 0 and spoken == []
    assert "'1.x' is not MAJOR.MINOR (like 1.39) or 'latest'" in result.stderr


def test_only_global_options_move_and_nothing_after_a_double_dash():
    from tally.cli.root import hoist_global_options

    assert hoist_global_options(cli, ["provider", "list", "--url", "U", "--name", "x"]) == [
        "--url", "U", "provider", "list", "--name", "x",
    ]  # fmt: skip
    assert hoist_global_options(cli, ["--token", "t", "trait", "list", "--", "--url", "U"]) == [
        "--token", "t", "trait", "list", "--", "--url", "U",
    ]  # fmt: skip
    assert hoist_global_options(cli, ["--version"]) == ["--version"]
