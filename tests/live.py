"""Helpers of the tests that run real servers: a free port, a live `tally serve` (the
one launcher: `tally_serve` and `tally_process`, over `server_process`, which starts
upstream's server too), `tally.serve.server` in a thread of the test, a poll with a
deadline, a quiet JSON request handler for fake services, and throw-away venvs of
other projects' packages (cached under /tmp between runs)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

# Per-test time limits (pytest-timeout; the default, 300 s, is pyproject's): a test that
# may first build a throw-away venv of other projects' packages (pip from PyPI: minutes
# on a fresh machine), and one on the clustered databases (bin/cluster starts them in
# the first test's set-up). A hung server still fails the test in minutes.
VENV_TIMEOUT = 1200
CLUSTER_TIMEOUT = 1200


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving_thread(app: Callable, limits: Any = None) -> Iterator[tuple[str, Any]]:
    """`tally.serve.server`'s server for the WSGI `app` in a thread of this process (on a
    port of its own, with `limits` or the defaults): its URL and the server."""
    from tally.serve import server as serving

    sock = serving.listen("127.0.0.1", 0)
    server = serving.make_server(app, sock, limits or serving.Limits(threads=2))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", server
    finally:
        server.close()
        server.task_dispatcher.shutdown()
        thread.join(5)


def wait_until(condition: Callable[[], object], seconds: float = 10, every: float = 0.05) -> bool:
    """Whether `condition()` came true within `seconds`, asked every `every` seconds:
    a state polled against a deadline, never a sleep standing in for an event."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return bool(condition())


@contextlib.contextmanager
def tally_serve(data: Path, **settings: str) -> Iterator[str]:
    """A real `tally serve` (SQLite in `data`, noauth, the lab on, its clock stopped;
    `settings` override, as TALLY_<NAME>) on a free port, in its own process group;
    yields its root URL and stops it (and its workers) after."""
    with tally_process(data, **settings) as (url, _):
        yield url


@contextlib.contextmanager
def tally_process(data: Path, **settings: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`tally_serve`, yielding the server process too (to signal its workers); its
    output goes to `data/serve.log`."""
    port = free_port()
    env = dict(
        os.environ,
        TALLY_DATA_DIR=str(data),
        TALLY_PORT=str(port),
        TALLY_DATABASE_URL="",
        TALLY_LAB="on",
        TALLY_LAB_STEP_SECONDS="0",
        TALLY_LAB_TRACKER_SECONDS="0",
    )
    env.update({f"TALLY_{name.upper()}": value for name, value in settings.items()})
    command = [sys.executable, "-c", "from tally.cli.main import cli; cli()", "serve"]
    with server_process(command, env, data / "serve.log", port) as found:
        yield found


@contextlib.contextmanager
def server_process(
    command: list[str], env: dict[str, str], log: Path, port: int, seconds: float = 90
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Any HTTP server (`tally serve`, upstream Placement under gunicorn) started as
    `command` in its own process group, listening on 127.0.0.1:`port`, its output in
    `log`: once `GET /` answers 200, its root URL and process; stopped (with every
    process of its group) after. The test fails, with the log's end, if it never
    answers or exits first."""
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:

        def answers() -> bool:
            if proc.poll() is not None:
                return True  # exited: no use waiting
            try:
                return httpx.get(f"{url}/", timeout=2, trust_env=False).status_code == 200
            except httpx.TransportError:
                return False

        if not wait_until(answers, seconds, every=0.2) or proc.poll() is not None:
            pytest.fail(f"the server at {url} did not start:\n{log.read_text()[-3000:]}")
        yield url, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its workers: our group
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def throwaway_venv(venv: Path, packages: list[str], what: str) -> Path:
    """A venv with `packages`, made once (one installer at a time) and then reused;
    the test is skipped, with pip's reason, when it cannot be made."""
    ready = venv / ".ready"
    if ready.exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        python = shutil.which("python3") or sys.executable
        pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
        for step in ([python, "-m", "venv", str(venv)], [*pip, *packages]):
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                why = (done.stderr or done.stdout).strip().splitlines()[-3:]
                pytest.skip(f"cannot install {what}: {' / '.join(why)}")
        ready.touch()
    return venv


class JsonRequestHandler(BaseHTTPRequestHandler):
    """Base of the fake services tests run in a thread: quiet, answers JSON."""

    def log_message(self, *args: object) -> None:
        pass

    def reply(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


OSC = ["python-openstackclient", "osc-placement"]
OSC_VENV = Path(os.environ.get("TALLY_OSC_VENV", Path(tempfile.gettempdir()) / "tally-osc-venv"))


def install_osc() -> Path:
    """The real `openstack` CLI with osc-placement, in a cached throw-away venv."""
    return throwaway_venv(OSC_VENV, OSC, " ".join(OSC))


# The WSGI servers docs/deploy.md shows, serving `tally.serve.wsgi:application` (the
# test extra installs both; pyuwsgi is uWSGI's own build as a wheel). Run them with
# `server_process`, HOME pointing at a folder of the test's: gunicorn puts its control
# socket there.
WSGI_APP = "tally.serve.wsgi:application"


def gunicorn_command(
    bind: str, workers: int = 2, *options: str, python: str | Path = sys.executable
) -> list[str]:
    """gunicorn serving Tally, run by `python` (a `wheel_venv`'s: the wheel's code)."""
    pytest.importorskip("gunicorn", reason="gunicorn is in the test extra: pip install '.[test]'")
    return [str(python), "-m", "gunicorn", "--bind", bind, "--workers", str(workers)] + [
        *options,
        WSGI_APP,
    ]


def uwsgi_command(bind: str, workers: int = 2, *options: str) -> list[str]:
    pytest.importorskip("pyuwsgi", reason="pyuwsgi is in the test extra: pip install '.[test]'")
    run = "import sys; from pyuwsgi import run; sys.exit(run())"  # the `uwsgi` command
    return [sys.executable, "-c", run, "--http-socket", bind, "--module", WSGI_APP] + [
        *("--master", "--processes", str(workers), "--lazy-apps", "--need-app"),
        "--die-on-term",  # SIGTERM stops it (uWSGI 2.0 would reload)
        *options,
    ]


def wheel_venv(work: Path) -> Path:
    """A fresh venv in `work/venv` with Tally installed from a wheel `python -m build`
    makes of this checkout (a copy of it, in `work`: the build writes in its tree).
    Offline: the build uses this environment's setuptools, the venv gets the wheel
    alone (`--no-deps`, no index) and sees this environment's packages through a .pth
    file (`pip check` there: the wheel's requirements are met). Its `bin/tally` runs
    the wheel's code as long as PYTHONPATH is unset."""
    import sysconfig

    pytest.importorskip("build", reason="`build` is in the test extra: pip install '.[test]'")
    root = Path(__file__).resolve().parents[1]
    tree = work / "checkout"
    tree.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, tree)
    shutil.copytree(root / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", work / "dist", tree)
    [wheel] = (work / "dist").glob("tally_placement-*-py3-none-any.whl")
    venv = work / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]
    _run(*pip, "install", "--no-deps", "--no-index", "--disable-pip-version-check", wheel)
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run(venv / "bin" / "python", "-c", code, clean=True).strip())
    (site / "_this_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(*pip, "check", "--disable-pip-version-check")
    return venv


def _run(*command: str | Path, clean: bool = False) -> str:
    """`command`'s output; `clean`: without PYTHON* (the fresh venv's own paths only)."""
    env = {k: v for k, v in os.environ.items() if not (clean and k.startswith("PYTHON"))}
    done = subprocess.run(
        [str(part) for part in command], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        pytest.fail(f"{command}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout
