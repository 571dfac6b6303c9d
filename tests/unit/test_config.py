"""Settings: defaults, environment, TOML file and an upstream placement.conf."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tally.config import SETTINGS, Settings, load_settings, unused_placement_options
from tally.serve.logs import log_path


def test_defaults_give_an_embedded_sqlite_database():
    settings = Settings.of(data_dir="/srv/tally")
    assert settings.database == "sqlite:////srv/tally/tally.sqlite"
    assert settings.over_capacity == "refuse"
    assert settings.auth_strategy == "noauth"


def test_environment_overrides_toml_file(tmp_path):
    toml = tmp_path / "tally.toml"
    toml.write_text('[tally]\nport = 9000\nover_capacity = "allow"\n')
    settings = load_settings(str(toml), environ={"TALLY_PORT": "9100"})
    assert settings.port == 9100
    assert settings.over_capacity == "allow"


def test_reads_the_matching_options_of_placement_conf(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[placement_database]\nconnection = postgresql+psycopg://p@db/placement\n"
        "[api]\nauth_strategy = noauth2\n"
        "[placement]\nallocation_conflict_retry_count = 3\n"
    )
    settings = load_settings(placement_conf=str(conf), environ={})
    assert settings.database == "postgresql+psycopg://p@db/placement"
    assert settings.auth_strategy == "noauth"
    assert settings.allocation_conflict_retry_count == 3


def test_placement_conf_is_read_as_oslo_config_reads_it(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[DEFAULT]\nconnection = sqlite:///not/ours.sqlite\n"  # DEFAULT's stays in DEFAULT
        "[placement]\nallocation_conflict_retry_count = 3\n"
        "allocation_conflict_retry_count = 7\n"  # repeated: the last one wins
        "[placement_database]\nconnection = mysql+pymysql://u:50%@db/placement\n"
    )
    settings = load_settings(placement_conf=str(conf), environ={})
    assert settings.allocation_conflict_retry_count == 7
    assert settings.database == "mysql+pymysql://u:50%@db/placement"
    assert unused_placement_options(conf) == ["[DEFAULT] connection"]
    with pytest.raises(OSError):  # a file named but missing is said, not skipped
        load_settings(placement_conf=str(tmp_path / "missing.conf"), environ={})
    conf.write_text("[placement]\nnot an option\n")
    with pytest.raises(ValueError, match="missing|assignment"):
        load_settings(placement_conf=str(conf), environ={})


def test_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="unknown setting"):
        Settings.of(no_such_thing=1)


def test_every_setting_has_an_env_name_and_help():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for setting in SETTINGS:
        assert setting.env == f"TALLY_{setting.name.upper()}"
        assert setting.help


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("over_capacity", "maybe", "must be one of refuse, allow"),
        ("port", "x", "integer"),
        ("port", 99999, "setting port must be from 1 to 65535, not 99999"),
        ("port", 0, "setting port must be from 1 to 65535, not 0"),
        ("workers", 0, "setting workers must be at least 1, not 0"),
    ],
)
def test_bad_values_name_the_setting(name, value, message):
    with pytest.raises(ValueError, match=message):
        Settings.of(**{name: value})


PLACEMENT_CONF = """
[DEFAULT]
debug = true
log_dir = {dir}
log_file = placement-api.log
state_path = /var/lib/placement

[placement_database]
connection = sqlite:///{dir}/placement.sqlite
max_pool_size = 20
max_retries = 10

[api]
auth_strategy = noauth2

[keystone_authtoken]
www_authenticate_uri = http://keystone/
"""


def test_placement_conf_logging_options_are_honoured(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text(PLACEMENT_CONF.format(dir=tmp_path))
    settings = load_settings(placement_conf=str(conf), environ={})
    assert settings.log_level == "DEBUG"
    assert (settings.log_dir, settings.log_file) == (str(tmp_path), "placement-api.log")
    assert log_path(settings.log_file, settings.log_dir) == str(tmp_path / "placement-api.log")
    assert log_path("", "/var/log/tally") == "/var/log/tally/tally.log"
    assert log_path("", "") is None  # stderr
    # what Tally ignores is named (auth_token reads its own section whole)
    assert settings.database_max_pool_size == 20  # the connection budget's, read
    assert unused_placement_options(conf) == [
        "[DEFAULT] state_path",
        "[placement_database] max_retries",
    ]


def test_tally_serve_logs_to_the_file_of_placement_conf_and_warns_once(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text(PLACEMENT_CONF.format(dir=tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    done = subprocess.run(
        [sys.executable, "-c", "from tally.cli.main import cli; cli()", "serve"]
        + ["--placement-conf", str(conf), "--get", "/"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    logged = (tmp_path / "placement-api.log").read_text()
    warning = "options Tally does not use, ignored: [DEFAULT] state_path, [placement_database]"
    assert logged.count(warning) == 1
    assert " DEBUG " in logged or "DEBUG" in logged
    assert warning not in done.stderr  # the log went to the file
