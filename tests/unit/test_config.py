"""Settings: defaults, environment, TOML file and an upstream placement.conf."""

from __future__ import annotations

import pytest

from tally.config import SETTINGS, Settings, load_settings


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
    [("over_capacity", "maybe", "must be one of refuse, allow"), ("port", "x", "integer")],
)
def test_bad_values_name_the_setting(name, value, message):
    with pytest.raises(ValueError, match=message):
        Settings.of(**{name: value})
