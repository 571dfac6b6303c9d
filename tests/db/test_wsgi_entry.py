"""`tally.serve.wsgi:application`, the entry point for gunicorn, uwsgi or mod_wsgi: it logs
as `tally serve` does, refuses a database without Tally's newest schema in one line
(changing nothing), and leaves the lab off unless `lab = on`."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from tally.db import migrate
from tally.db.engine import make_engine
from tally.placement.ledger.bootstrap import prepare_database

SERVE_ONE = """
import falcon.testing
from tally.serve.wsgi import application
client = falcon.testing.TestClient(application)
for path in ("/resource_providers", "/identity/v3"):
    print(path, client.simulate_get(path, headers={"x-auth-token": "admin"}).status_code)
"""


def load(tmp_path: Path, code: str = "import tally.serve.wsgi", **env: str):
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "TALLY_DATABASE_URL": "", "TALLY_DATA_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_entry_point_moved_out_of_the_placement_package():
    assert importlib.util.find_spec("tally.serve.wsgi") is not None
    assert importlib.util.find_spec("tally.placement.wsgi") is None


def test_a_database_without_tallys_schema_is_refused(tmp_path):
    done = load(tmp_path)
    url = f"sqlite:///{tmp_path / 'tally.sqlite'}"
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"tally.db.errors.UnusableDatabase: {url} holds no Tally schema: run `tally db "
        f"upgrade` with the same settings first (as `placement-manage db sync` for upstream "
        f"Placement); nothing was changed."
    )
    assert not (tmp_path / "tally.sqlite").exists()


def test_an_older_tally_schema_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'tally.sqlite'}"
    engine = make_engine(url)
    migrate.upgrade(engine, "0001")
    engine.dispose()
    done = load(tmp_path)
    assert done.returncode == 1
    line = done.stderr.splitlines()[-1]
    assert line.startswith(f"tally.db.errors.UnusableDatabase: {url} is at Tally schema revision ")
    assert f"older than this Tally's {migrate.head_revision()}: run `tally db upgrade`" in line
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() != (
            migrate.head_revision()
        )
    engine.dispose()


def test_a_migrated_database_is_served_and_logged_as_tally_serve_logs(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    migrate.upgrade(engine)
    engine.dispose()
    done = load(tmp_path, SERVE_ONE)
    assert done.returncode == 0, done.stderr
    # the lab (identity under /identity) is off with `lab = auto`: the bind is unknown
    assert done.stdout.splitlines() == ["/resource_providers 200", "/identity/v3 404"]
    log = [line for line in done.stderr.splitlines() if "tally.requestlog" in line]
    assert len(log) == 2 and " INFO tally.requestlog [req-" in log[0]
    assert '"GET /resource_providers" status: 200' in log[0]
    done = load(tmp_path, SERVE_ONE, TALLY_LAB="on")
    assert done.stdout.splitlines()[-1] == "/identity/v3 200"
    # loading logs the start line and noauth's WARNING, nothing else (alembic's plugin
    # set-up said seven lines at INFO)
    loading = load(tmp_path).stderr.splitlines()
    assert [line.split(" ")[2:4] for line in loading] == [["INFO", "tally"], ["WARNING", "tally"]]


def test_the_old_entry_name_is_the_same_application(tmp_path):
    """Deployments written for `tally.wsgi:application` keep working."""
    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    migrate.upgrade(engine)
    engine.dispose()
    code = (
        "import tally.wsgi, tally.serve.wsgi as w; print(tally.wsgi.application is w.application)"
    )
    done = load(tmp_path, code)
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr


def test_keystone_without_its_configuration_fails_at_load_in_one_line(tmp_path):
    """The line `tally serve` refuses with (tests/unit/test_serve_safety.py)."""
    from tests.unit.test_serve_safety import keystone_refusal

    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    migrate.upgrade(engine)
    engine.dispose()
    for conf_text in (None, "[keystone_authtoken]\nauth_type = password\n"):
        line = keystone_refusal(tmp_path, conf_text)
        env = {"TALLY_AUTH_STRATEGY": "keystone"}
        if conf_text is not None:
            env["TALLY_PLACEMENT_CONF"] = str(tmp_path / "placement.conf")
        done = load(tmp_path, SERVE_ONE, **env)
        assert done.returncode == 1
        assert done.stderr.splitlines()[-1] == f"tally.serve.edge.UnsafeSettings: {line}"


def started(stderr: str) -> list[str]:
    """The start line(s) and warnings the entry logged (after `INFO tally `...)."""
    return [
        line.split(" tally ", 1)[1]
        for line in stderr.splitlines()
        if " INFO tally Tally Placement " in line or " WARNING tally " in line
    ]


def test_the_start_line_hides_the_password_and_noauth_warns(tmp_path):
    """A server database that is down only now still loads (the app answers 503):
    its start line names it without the password, and noauth adds its WARNING."""
    from tally.serve.start import NOAUTH_WARNING

    url = "postgresql+psycopg://placement:s3cret@127.0.0.1:1/placement"
    done = load(tmp_path, TALLY_DATABASE_URL=url, TALLY_DATABASE_MAX_POOL_SIZE="4")
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stderr
    pid = re.search(r"under WSGI \(pid (\d+)\)", done.stderr)
    assert pid is not None, done.stderr
    assert started(done.stderr) == [
        f"Tally Placement under WSGI (pid {pid[1]}): database postgresql+psycopg://"
        "placement:***@127.0.0.1:1/placement, auth_strategy noauth, lab off (lab = auto is "
        "off under a WSGI server: set lab = on to serve it), candidates index up to 2048 MiB "
        "per process",
        NOAUTH_WARNING,
    ]


def test_keystone_and_the_lab_are_named_and_no_warning_given(tmp_path):
    from tests.unit.test_serve_safety import KEYSTONE_AUTHTOKEN

    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    migrate.upgrade(engine)
    engine.dispose()
    (tmp_path / "placement.conf").write_text(KEYSTONE_AUTHTOKEN)
    env = {
        "TALLY_AUTH_STRATEGY": "keystone",
        "TALLY_PLACEMENT_CONF": str(tmp_path / "placement.conf"),
    }
    done = load(tmp_path, **env, TALLY_LAB="on", TALLY_CANDIDATES_INDEX_MAX_MB="0")
    assert done.returncode == 0, done.stderr
    [line] = started(done.stderr)
    assert line.endswith(
        f": database sqlite:///{tmp_path / 'tally.sqlite'}, auth_strategy keystone, lab on "
        "(compute /compute/v2.1), candidates index off"
    )


TRACKED = """
import time
import falcon.testing
from tally.serve.wsgi import application
client = falcon.testing.TestClient(application)
admin = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
added = client.simulate_post(
    "/compute/v2.1/os-lab/hosts", json={"hosts": [{"name": "cmp-1"}]}, headers=admin
)
rp = added.json["hosts"][0]["provider_uuid"]
path = f"/resource_providers/{rp}/inventories"
found = client.simulate_get(path, headers=admin).json
print("reported", found["inventories"]["MEMORY_MB"]["reserved"])
found["inventories"]["MEMORY_MB"]["reserved"] = 0  # an operator's hand edit
client.simulate_put(path, json=found, headers=admin)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    reserved = client.simulate_get(path, headers=admin).json["inventories"]["MEMORY_MB"]["reserved"]
    if reserved:
        break
    time.sleep(0.2)
print("after the tracker", reserved)
"""


def test_the_lab_clock_runs_under_wsgi_as_under_tally_serve(tmp_path):
    """With `lab = on` the entry's process runs the lab's resource tracker (and
    migrations' steps) as each `tally serve` worker does: a `reserved` edited in
    Placement by hand is rewritten from the host's configuration by the next report.
    It ran under `tally serve` only, so under gunicorn the lab's moves never advanced."""
    engine = make_engine(f"sqlite:///{tmp_path / 'tally.sqlite'}")
    prepare_database(engine)  # (`tally db upgrade`: the standard classes too)
    engine.dispose()
    done = load(tmp_path, TRACKED, TALLY_LAB="on", TALLY_LAB_TRACKER_SECONDS="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["reported 512", "after the tracker 512"], done.stderr
