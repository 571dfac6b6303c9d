"""The road to production, as an operator takes it from the README and docs/deploy.md,
each step's exit status and output checked:

1. `python -m build` makes the wheel of this checkout, and it installs into a fresh
   venv (tests.live.wheel_venv) whose `tally` and gunicorn run the wheel's code;
2. `tally db upgrade` from three processes at once on one new PostgreSQL database,
   as each host's systemd unit runs it: they start while a fourth upgrade holds the
   lock, so all three certainly meet at it; each says it waits, exits 0 and prints
   the head revision, and the schema is there once;
3. three gunicorn "hosts" on that database (127.0.0.1, three ports, 2 workers each:
   noauth, the lab on): each worker's start line and the noauth WARNING, and a
   request served by each;
4. HAProxy in front of them (`bin/cluster haproxy local`: the API frontend of
   `bin/cluster haproxy up`, `option httpchk GET /healthcheck`): every host UP;
5. gunicorn with `auth_strategy = keystone` from a placement.conf, as deploy.md shows,
   its `[keystone_authtoken]` on the lab's Keystone (the hosts' `/identity/v3`,
   through HAProxy): no token 401, naming where to get one; a token from that Keystone
   200; `/metrics` without a token 401;
6. the README's doctor story ("The whole story" and "No valid host", the lab compute
   API served by the three hosts from the shared database) through HAProxy's address
   with the wheel's `tally`; one host killed mid-story (kill -9, its master and
   workers): HAProxy takes it out by its check, the story goes on and every command
   exits and prints as the README says; HAProxy's log shows every host served and no
   5xx but 503; the keystone host reads the lab's hosts the story made.

Needs PostgreSQL (TALLY_TEST_DATABASE) and HAProxy (`bin/cluster` installs Debian's
with apt as root). About a minute."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from tally.db import migrate
from tally.db.upgrade_lock import PG_KEY
from tally.serve.start import NOAUTH_WARNING
from tests.conftest import server_database_url
from tests.e2e.test_readme_whole import (
    MARK,
    commands,
    expected_statuses,
    marked,
    readme_blocks,
    statuses,
)
from tests.live import free_port, gunicorn_command, server_process, wait_until, wheel_venv

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "bin" / "cluster"
STORY = ("The whole story", "No valid host")
KILL_AFTER = "RP=$(tally lab break delete-while-down"  # the host dies after this command
SERVICE_PASSWORD = "placement-service-pw"
# the lab's users: its admin, and the service user auth_token validates tokens as
LAB_USERS = f"admin:admin:admin:admin,placement:{SERVICE_PASSWORD}:service:service"
WAITING = (
    "waiting for the schema upgrade lock of {url}: another `tally db upgrade` (or `tally "
    "serve` starting) is upgrading it"
)
START = re.compile(r" INFO tally (Tally Placement under WSGI \(pid \d+, .*)")
REQUEST = re.compile(r" placement placement/(\S+) \S+ (\d{3}) ")  # HAProxy's httplog
ADMIN = {"x-auth-token": "admin"}


def test_the_production_story(tmp_path: Path) -> None:
    database, drop = server_database_url("postgresql")  # (a skip without PostgreSQL)
    try:
        venv = wheel_venv(tmp_path / "install")  # 1
        imported = run(venv, "python", "-c", "import tally; print(tally.__file__)")
        assert imported.startswith(str(venv)), imported  # the wheel's code, not the checkout's
        upgrade_from_three_hosts(venv, database, tmp_path)  # 2
        with contextlib.ExitStack() as stack:
            hosts = [
                stack.enter_context(noauth_host(venv, database, tmp_path, n)) for n in (1, 2, 3)
            ]
            proxy = stack.enter_context(haproxy(tmp_path, [url for url, _ in hosts]))  # 4
            token = keystone_checks(stack, venv, database, tmp_path, proxy)  # 5
            doctor_story_through(proxy, venv, tmp_path, hosts)  # 6
            names = {p["name"] for p in keystone_get(token.host, "/resource_providers", token.id)}
            assert names == {"lab-compute-1", "lab-compute-2", "lab-compute-3"}
    finally:
        drop()


def operator_env(venv: Path, home: Path, **settings: str) -> dict[str, str]:
    """An operator's shell: the venv's commands first, no settings but `settings`
    (TALLY_*), nothing pointing Python at the checkout; HOME a folder of its own
    (gunicorn's control socket goes there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TALLY_", "PYTHON", "OS_"))}
    home.mkdir(parents=True, exist_ok=True)
    env.update(PATH=f"{venv / 'bin'}:{env['PATH']}", HOME=str(home), **settings)
    return env


def run(venv: Path, command: str, *args: str) -> str:
    done = subprocess.run(
        [str(venv / "bin" / command), *args],
        env=operator_env(venv, venv.parent / "home"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{command} {args}:\n{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout


def upgrade_from_three_hosts(venv: Path, database: str, work: Path) -> None:
    shown = sa.engine.make_url(database).render_as_string(hide_password=True)
    env = operator_env(venv, work / "upgrade", TALLY_DATABASE_URL=database)
    logs = [work / "upgrade" / f"host{n}.err" for n in (1, 2, 3)]
    holder = sa.create_engine(database, poolclass=NullPool)
    try:
        with holder.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": PG_KEY})
            procs = []
            for log in logs:
                with log.open("w") as err:
                    command = [str(venv / "bin" / "tally"), "db", "upgrade"]
                    procs.append(
                        subprocess.Popen(
                            command, env=env, stdout=subprocess.PIPE, stderr=err, text=True
                        )
                    )
            waiting = WAITING.format(url=shown)
            all_wait = wait_until(
                lambda: all(waiting in log.read_text() for log in logs), seconds=60, every=0.1
            )
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": PG_KEY})
        outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        holder.dispose()
    errors = [log.read_text() for log in logs]
    assert all_wait, errors
    assert [proc.returncode for proc in procs] == [0, 0, 0], errors
    assert outputs == [f"database at revision {migrate.head_revision()}\n"] * 3
    assert errors == [waiting + "\n"] * 3
    engine = sa.create_engine(database, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            versions = conn.execute(sa.text("SELECT version_num FROM alembic_version"))
            assert versions.scalars().all() == [migrate.head_revision()]
            standard = "SELECT COUNT(*) FROM resource_classes WHERE name = 'VCPU'"
            assert conn.execute(sa.text(standard)).scalar() == 1
    finally:
        engine.dispose()


@contextlib.contextmanager
def noauth_host(
    venv: Path, database: str, work: Path, n: int
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Host `n`: gunicorn, 2 workers of 4 threads, noauth on 127.0.0.1 with the lab on;
    its URL and process once both workers said what they serve."""
    home = work / f"host{n}"
    env = operator_env(
        venv,
        home,
        TALLY_DATABASE_URL=database,
        TALLY_LAB="on",
        TALLY_LAB_USERS=LAB_USERS,
        TALLY_DATA_DIR=str(home / "data"),
    )
    port = free_port()
    command = gunicorn_command(
        f"127.0.0.1:{port}", 2, "--threads", "4", python=venv / "bin" / "python"
    )
    log = home / "gunicorn.log"
    with server_process(command, env, log, port) as (url, proc):
        wait_until(lambda: len(START.findall(log.read_text())) >= 2, seconds=60, every=0.2)
        text = log.read_text()
        started = [re.sub(r"pid \d+", "pid N", line) for line in START.findall(text)]
        shown = sa.engine.make_url(database).render_as_string(hide_password=True)
        assert (
            started
            == [
                f"Tally Placement under WSGI (pid N, listening on 127.0.0.1:{port}): database "
                f"{shown}, auth_strategy noauth, lab on (compute /compute/v2.1, identity "
                "/identity/v3), candidates index up to 2048 MiB per process"
            ]
            * 2
        ), text[-3000:]
        assert text.count(f" WARNING tally {NOAUTH_WARNING}\n") == 2, text[-3000:]
        answer = httpx.get(f"{url}/resource_providers", headers=ADMIN, trust_env=False)
        assert (answer.status_code, answer.json()) == (200, {"resource_providers": []})
        yield url, proc
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]  # (the lab's faults log ERRORs, as Nova's)


@contextlib.contextmanager
def haproxy(work: Path, hosts: list[str]) -> Iterator[Proxy]:
    """HAProxy on 127.0.0.1 in front of `hosts` (`bin/cluster haproxy local`), once it
    sees every one UP; stopped after."""
    proxy = Proxy(work / "haproxy", f"127.0.0.1:{free_port()}")
    backends = [url.removeprefix("http://") for url in hosts]
    done = proxy.cluster("haproxy", "local", proxy.bind, *backends)
    if done.returncode and "install" in done.stderr:
        pytest.skip(f"HAProxy is needed: {done.stderr.strip()}")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    try:
        config = (proxy.files / "haproxy" / "haproxy.cfg").read_text()
        assert "    option httpchk GET /healthcheck\n" in config, config
        everyone = {f"placement/api{n}": "UP" for n in (1, 2, 3)}
        assert wait_until(lambda: proxy.states() == everyone, seconds=30, every=0.2), proxy.states()
        yield proxy
    finally:
        proxy.cluster("haproxy", "down")


class Proxy:
    """A `bin/cluster haproxy local` of this test, its files in `files`."""

    def __init__(self, files: Path, bind: str) -> None:
        self.files, self.bind = files, bind
        self.url = f"http://{bind}"

    def cluster(self, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, TALLY_CLUSTER_DIR=str(self.files))
        return subprocess.run(
            [str(CLUSTER), *args], env=env, capture_output=True, text=True, timeout=600
        )

    def states(self) -> dict[str, str]:
        """`placement/apiN` -> its state as HAProxy sees it (`UP`, `DOWN`, `UP 1/2`...)."""
        done = self.cluster("haproxy", "status")
        assert done.returncode == 0, done.stderr
        found = {}
        for line in done.stdout.splitlines():
            server, rest = line.split(" ", 1)
            found[server] = rest.rsplit(" ", 1)[0]
        return found

    def log(self) -> str:
        return (self.files / "haproxy" / "log").read_text()


class Token(NamedTuple):
    id: str  # a token of the lab's admin, from the lab's Keystone
    host: str  # the keystone host's URL


def keystone_checks(
    stack: contextlib.ExitStack, venv: Path, database: str, work: Path, proxy: Proxy
) -> Token:
    """Step 5: a gunicorn host whose placement.conf says keystone, validating tokens
    with the lab's Keystone behind HAProxy. Returns a token of the lab's admin."""
    keystone = f"{proxy.url}/identity/v3"
    conf = work / "keystone-host" / "placement.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(
        "[api]\nauth_strategy = keystone\n\n"
        f"[placement_database]\nconnection = {database}\n\n"
        "[keystone_authtoken]\n"
        f"www_authenticate_uri = {keystone}\n"
        f"auth_url = {keystone}\n"
        "auth_type = password\n"
        "username = placement\n"
        f"password = {SERVICE_PASSWORD}\n"
        "project_name = service\n"
        "user_domain_name = Default\n"
        "project_domain_name = Default\n"
    )
    env = operator_env(
        venv,
        conf.parent,
        TALLY_PLACEMENT_CONF=str(conf),
        TALLY_DATA_DIR=str(conf.parent / "data"),
    )
    port = free_port()
    command = gunicorn_command(
        f"127.0.0.1:{port}", 2, "--threads", "4", python=venv / "bin" / "python"
    )
    log = conf.parent / "gunicorn.log"
    url, _ = stack.enter_context(server_process(command, env, log, port))
    wait_until(lambda: len(START.findall(log.read_text())) >= 2, seconds=60, every=0.2)
    text = log.read_text()
    shown = sa.engine.make_url(database).render_as_string(hide_password=True)
    assert {re.sub(r"pid \d+", "pid N", line) for line in START.findall(text)} == {
        f"Tally Placement under WSGI (pid N, listening on 127.0.0.1:{port}): database "
        f"{shown}, auth_strategy keystone, lab off (lab = auto is off under a WSGI server: "
        "set lab = on to serve it), candidates index up to 2048 MiB per process"
    }, text[-3000:]
    assert " WARNING tally " not in text, text[-3000:]

    with httpx.Client(base_url=url, trust_env=False, timeout=30) as placement:
        refused = placement.get("/resource_providers")
        assert refused.status_code == 401, refused.text
        assert refused.json()["errors"][0]["title"] == "Unauthorized"
        assert refused.headers["www-authenticate"] == f'Keystone uri="{keystone}"'
        forged = placement.get("/resource_providers", headers=ADMIN)  # noauth's token
        assert forged.status_code == 401, forged.text
        metrics = placement.get("/metrics")
        assert metrics.status_code == 401, metrics.text

        login = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": "admin",
                            "domain": {"name": "Default"},
                            "password": "admin",
                        }
                    },
                },
                "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}},
            }
        }
        issued = httpx.post(f"{keystone}/auth/tokens", json=login, trust_env=False, timeout=30)
        assert issued.status_code == 201, issued.text
        token = Token(issued.headers["x-subject-token"], url)
        assert keystone_get(url, "/resource_providers", token.id) == []
        counted = placement.get("/metrics", headers={"x-auth-token": token.id})
        assert counted.status_code == 200, counted.text
        assert "tally_http_requests_total" in counted.text
    return token


def keystone_get(url: str, path: str, token: str) -> list[dict]:
    answer = httpx.get(f"{url}{path}", headers={"x-auth-token": token}, trust_env=False)
    assert answer.status_code == 200, answer.text
    return answer.json()["resource_providers"]


def doctor_story_through(
    proxy: Proxy, venv: Path, work: Path, hosts: list[tuple[str, subprocess.Popen]]
) -> None:
    """Step 6: the README's doctor story through HAProxy, host 2 killed after
    KILL_AFTER and the story resumed at once: until HAProxy's check takes the host out
    (two failures 1 s apart), a request sent to it finds no one listening and HAProxy
    sends it to another (`retries`, `option redispatch`). Between two commands: a
    request in flight would die with its host, a 502 that says nothing of Tally."""
    story = [c for block in readme_blocks(STORY) for c in commands(block)]
    [kill_at] = [n + 1 for n, c in enumerate(story) if c.startswith(KILL_AFTER)]
    resume = work / "resume"
    os.mkfifo(resume)
    pause = f"printf '%s\\n' '::paused::'\nread -r _ < {shlex.quote(str(resume))}\n"
    script = marked(story[:kill_at], proxy.url) + pause + marked(story[kill_at:], proxy.url)
    stderr = work / "story.err"
    with stderr.open("w") as err:
        shell = subprocess.Popen(
            ["bash", "-c", script],
            cwd=work,
            env=operator_env(venv, work / "operator"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert shell.stdout is not None
    try:
        before = []
        for line in shell.stdout:
            if line == "::paused::\n":
                break
            before.append(line)
        else:
            pytest.fail(f"the story ended before its pause:\n{''.join(before)}{stderr.read_text()}")
        served = {server for server, _ in REQUEST.findall(proxy.log())}
        assert served == {"api1", "api2", "api3"}, proxy.log()[-3000:]  # round robin
        killed = len(proxy.log())
        os.killpg(hosts[1][1].pid, signal.SIGKILL)  # host 2: master and workers
        with resume.open("w") as go:  # at once: HAProxy has not seen it yet
            go.write("\n")
        out = "".join(before) + shell.stdout.read()
        shell.wait(timeout=60)
    finally:
        if shell.poll() is None:  # (a failure above: not left waiting for its go)
            shell.kill()
            shell.wait()
    check_story(story, out, stderr.read_text())
    expected = {"placement/api1": "UP", "placement/api2": "DOWN", "placement/api3": "UP"}
    assert proxy.states() == expected

    log = proxy.log()
    found = REQUEST.findall(log)
    assert found, log[-3000:]
    bad = sorted({int(status) for _, status in found if int(status) >= 500} - {503})
    assert not bad, f"HAProxy answered {bad}:\n{log[-3000:]}"
    assert "Server placement/api2 is DOWN" in log[killed:]
    # every request after the kill was answered by host 1 or 3 (one that HAProxy sent
    # to host 2 before its check failed twice went on to another: `+1` retries)
    assert {server for server, _ in REQUEST.findall(log[killed:])} <= {"api1", "api3"}


def check_story(story: list[str], out: str, err: str) -> None:
    """Each command exits as the README says, and prints what it says."""
    found = statuses(out)
    assert len(found) == len(story), out[-3000:] + err[-3000:]
    for command, status, expected in zip(story, found, expected_statuses(story), strict=True):
        assert status == expected, f"$ {command}\nexit {status}, not {expected}\n{err[-3000:]}"
    said = [text.strip() for text in re.split(rf"^{MARK}\d+$", out, flags=re.M)]

    def printed(command: str, run: int = 0) -> str:
        """What `command` printed, the `run`th time it ran."""
        return said[[n for n, c in enumerate(story) if c == command][run]]

    shrink = (
        "tally provider inventory set $RP --amend --resource VCPU=16:15 "
        "--resource VCPU:allocation_ratio=1"
    )
    assert printed(shrink).startswith("Refused before writing"), printed(shrink)
    explained = printed(
        "tally explain $RP --resource VCPU=16:15 --resource VCPU:allocation_ratio=1"
    )
    assert "The way out, in order" in explained and "| orphan |" in explained, explained
    freed = printed("tally audit --provider $RP --delete --apply")
    assert "| orphan |" in freed and "freed lab-compute-" in freed, freed
    assert re.search(r"^\| VCPU +\| 1\.0 .*\| 15 +\| 1 +\| 16 +\| 1 +\|$", printed(shrink, 1), re.M)
    audit = "Nothing found: every consumer and server checked is accounted for."
    assert printed("tally audit") == audit
    boots = "tally lab boot web-1 -c status -f value && tally lab boot web-2 -c status -f value"
    assert printed(boots) == "ACTIVE\nACTIVE"
    assert printed("tally lab boot web-3 -c status -f value") == "ERROR"
    why = printed("tally why web-3")
    assert "action: create" in why and "What would make it fit" in why, why
    [request] = re.findall(r"^request: (req-[0-9a-f-]+)$", why, re.M)
    healed = printed("tally heal --apply")
    assert "take-back" in healed and "| True " in healed, healed
    assert printed("tally lab boot web-4 -c status -f value") == "ACTIVE"
    assert request in printed("tally failures")  # as recorded by the host that served the boot
