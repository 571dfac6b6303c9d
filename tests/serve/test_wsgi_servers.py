"""`tally.serve.wsgi:application` under the WSGI servers docs/deploy.md shows, gunicorn
and uWSGI (pyuwsgi: uWSGI's own build as a wheel), each with two workers: every
worker logs the start line (the database, the auth strategy, the lab, the index)
and, under noauth, the WARNING that every `admin` token is an admin; a request is
served; and noauth on an address others reach is refused as `tally serve` refuses
it (the worker fails to boot, so the server stops)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from tally.db.engine import make_engine
from tally.placement.ledger.bootstrap import prepare_database
from tally.serve.start import NOAUTH_WARNING
from tests.live import free_port, gunicorn_command, server_process, uwsgi_command, wait_until

pytestmark = pytest.mark.slow

SERVERS = {"gunicorn": gunicorn_command, "uwsgi": uwsgi_command}
START = re.compile(r" INFO tally Tally Placement under WSGI \(pid (\d+), (.*)")


def environment(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a server with its own migrated SQLite database."""
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'tally.sqlite'}")
    prepare_database(engine)  # (`tally db upgrade`)
    engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    # HOME: gunicorn's control socket goes there; one per server
    env.update(HOME=str(tmp_path), TALLY_DATA_DIR=str(tmp_path / "data"), **settings)
    return env


@pytest.mark.parametrize("server", SERVERS)
def test_each_worker_says_what_it_serves_and_warns_of_noauth(tmp_path, server):
    port = free_port()
    command = SERVERS[server](f"127.0.0.1:{port}")
    log = tmp_path / "server.log"
    with server_process(command, environment(tmp_path), log, port) as (url, _):
        answer = httpx.get(f"{url}/resource_providers", headers={"x-auth-token": "admin"})
        assert (answer.status_code, answer.json()) == (200, {"resource_providers": []})
        # the first worker up answers; the other may still be building its app
        wait_until(lambda: len(START.findall(log.read_text())) >= 2, seconds=60, every=0.2)
    text = log.read_text()
    started = START.findall(text)
    assert len(started) == 2 and started[0][0] != started[1][0], text[-3000:]  # per worker
    database = f"sqlite:///{tmp_path / 'data' / 'tally.sqlite'}"
    assert {line for _, line in started} == {
        f"listening on 127.0.0.1:{port}): database {database}, auth_strategy noauth, lab off "
        "(lab = auto is off under a WSGI server: set lab = on to serve it), candidates "
        "index up to 2048 MiB per process"
    }
    assert text.count(f" WARNING tally {NOAUTH_WARNING}\n") == 2
    assert '"GET /resource_providers" status: 200' in text


@pytest.mark.parametrize("server", SERVERS)
def test_noauth_on_an_address_others_reach_is_refused(tmp_path, server):
    command = SERVERS[server](f"0.0.0.0:{free_port()}")
    done = subprocess.run(
        command, env=environment(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    line = (
        "tally.serve.edge.UnsafeSettings: auth_strategy = noauth on 0.0.0.0: anyone reaching "
        "it would be an admin. Use auth_strategy = keystone, listen on 127.0.0.1, or set "
        "noauth_allow_remote = true (TALLY_NOAUTH_ALLOW_REMOTE=1) if that is intended."
    )
    assert line in (done.stdout + done.stderr).splitlines()
    assert "Tally Placement under WSGI" not in done.stdout + done.stderr
