"""Safe defaults of `tally serve`: noauth only on loopback unless told, and the
identity libraries' debug chatter kept out of the log."""

from __future__ import annotations

import logging

import click
import pytest
from click.testing import CliRunner

from tally.cli.main import cli
from tally.cli.serve import refuse_unsafe_bind
from tally.config import Settings
from tally.serve.edge import is_loopback
from tally.serve.logs import QUIET_LOGGERS, configure_logging


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_hosts(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.1", "example.com", ""])
def test_non_loopback_hosts(host):
    assert not is_loopback(host)


def test_noauth_on_a_public_address_is_refused(tmp_path):
    result = CliRunner().invoke(
        cli,
        ["serve", "--host", "0.0.0.0", "--port", "18999"],
        env={"TALLY_DATA_DIR": str(tmp_path / "data"), "TALLY_AUTH_STRATEGY": "noauth"},
    )
    assert result.exit_code == 1
    assert "refusing to serve: auth_strategy = noauth on 0.0.0.0" in result.output
    assert "noauth_allow_remote" in result.output
    assert not (tmp_path / "data").exists()  # refused before touching the database


KEYSTONE_AUTHTOKEN = (
    "[keystone_authtoken]\nauth_type = password\nauth_url = http://keystone.example/v3\n"
    "username = placement\npassword = pw\nproject_name = service\n"
    "user_domain_name = Default\nproject_domain_name = Default\n"
)


def test_noauth_remote_when_explicitly_allowed_or_with_keystone(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text(KEYSTONE_AUTHTOKEN)
    refuse_unsafe_bind(Settings.of(host="0.0.0.0", noauth_allow_remote=True))
    refuse_unsafe_bind(
        Settings.of(host="0.0.0.0", auth_strategy="keystone", placement_conf=str(conf))
    )
    refuse_unsafe_bind(Settings.of(host="127.0.0.1"))
    with pytest.raises(click.ClickException):
        refuse_unsafe_bind(Settings.of(host="10.1.2.3"))


def test_identity_libraries_never_log_below_info():
    root = logging.getLogger()
    saved = root.level
    root.setLevel(logging.DEBUG)  # as basicConfig would on a fresh process
    try:
        configure_logging(Settings.of(log_level="DEBUG"))
        assert logging.getLogger("tally").isEnabledFor(logging.DEBUG)
        for name in QUIET_LOGGERS:
            assert not logging.getLogger(name).isEnabledFor(logging.DEBUG), name
            assert logging.getLogger(f"{name}.session").getEffectiveLevel() >= logging.INFO
    finally:
        root.setLevel(saved)
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_lab_auth_with_the_lab_off_is_refused_before_the_database(tmp_path):
    result = CliRunner().invoke(
        cli,
        ["serve", "--port", "18999"],
        env={
            "TALLY_DATA_DIR": str(tmp_path / "data"),
            "TALLY_AUTH_STRATEGY": "lab",
            "TALLY_LAB": "off",
        },
    )
    assert result.exit_code == 1
    assert "refusing to serve: auth_strategy = lab needs the lab cloud" in result.output
    assert not (tmp_path / "data").exists()


def test_lab_auth_off_loopback_needs_passwords_of_the_operator():
    public = {"host": "0.0.0.0", "auth_strategy": "lab", "lab": "on"}
    for users in ("admin:admin:admin:admin", "admin:x:admin:admin,bob:bob:demo:member"):
        with pytest.raises(click.ClickException, match="keep the default password"):
            refuse_unsafe_bind(Settings.of(**public, lab_users=users))
    refuse_unsafe_bind(Settings.of(**public, lab_users="admin:Long-s3cret:admin:admin"))
    refuse_unsafe_bind(Settings.of(host="127.0.0.1", auth_strategy="lab", lab="on"))


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "[2001:db8::1]"])
def test_lab_auto_is_off_on_an_address_others_reach(host):
    from tally.serve.compose import describe, lab_enabled

    assert not lab_enabled(Settings.of(host=host))  # SQLite, lab = auto
    assert lab_enabled(Settings.of(host=host, lab="on"))
    assert describe(Settings.of(host=host), "http://x") == [
        f"Lab off (setting lab = auto, and {host} is not a loopback address): Placement only"
    ]


def test_lab_auto_stays_on_with_sqlite_on_loopback():
    from tally.serve.compose import describe, lab_enabled

    assert lab_enabled(Settings.of(host="127.0.0.1"))
    assert lab_enabled(Settings.of(host="localhost"))
    assert not lab_enabled(Settings.of(host="127.0.0.1", database_url="postgresql://x/y"))
    assert describe(Settings.of(database_url="postgresql://x/y"), "http://x") == [
        "Lab off (setting lab = auto, and the database is not the embedded SQLite): Placement only"
    ]


def test_a_public_bind_serves_no_lab_identity(sqlite_engine):
    import falcon.testing

    from tally.serve.compose import create_server

    settings = Settings.of(host="0.0.0.0", noauth_allow_remote=True)
    client = falcon.testing.TestClient(create_server(settings, sqlite_engine))
    admin = {"x-auth-token": "admin"}
    for path in ("/identity/v3", "/compute/v2.1"):  # Placement's own 404: no such route
        assert client.simulate_get(path, headers=admin).status_code == 404, path
    assert client.simulate_get("/resource_providers", headers=admin).status_code == 200


def keystone_refusal(tmp_path, conf_text: str | None) -> str:
    """The line `auth_strategy = keystone` is refused with, given this placement.conf."""
    conf = tmp_path / "placement.conf"
    if conf_text is None:
        return (
            "auth_strategy = keystone needs an upstream placement.conf (setting "
            "placement_conf, TALLY_PLACEMENT_CONF) whose [keystone_authtoken] section "
            "configures auth_token: none is set, so no token could be validated."
        )
    conf.write_text(conf_text)
    if "auth_type" not in conf_text:
        return (
            f"auth_strategy = keystone: [keystone_authtoken] of {conf} sets no auth_type "
            "(nor auth_url, username, password): auth_token could not validate any token."
        )
    return (
        f"auth_strategy = keystone: [keystone_authtoken] of {conf} does not configure "
        "auth_token: Auth plugin requires parameters which were not given: auth_url"
    )


KEYSTONE_CONFS = {
    "no placement.conf": None,
    "no section": "[api]\nauth_strategy = keystone\n",
    "no auth_type": "[keystone_authtoken]\nwww_authenticate_uri = http://k/v3\n",
    "no auth_url": "[keystone_authtoken]\nauth_type = password\nusername = placement\n",
}


@pytest.mark.parametrize("conf_text", KEYSTONE_CONFS.values(), ids=KEYSTONE_CONFS)
def test_keystone_without_its_configuration_is_refused_in_one_line(tmp_path, conf_text):
    """It started and answered 500 to every request (auth_token had no auth plugin)."""
    line = keystone_refusal(tmp_path, conf_text)
    env = {"TALLY_DATA_DIR": str(tmp_path / "data"), "TALLY_AUTH_STRATEGY": "keystone"}
    if conf_text is not None:
        env["TALLY_PLACEMENT_CONF"] = str(tmp_path / "placement.conf")
    result = CliRunner().invoke(cli, ["serve", "--port", "18999"], env=env)
    assert result.exit_code == 1
    assert result.output == f"Error: refusing to serve: {line}\n"
    assert not (tmp_path / "data").exists()  # refused before touching the database
