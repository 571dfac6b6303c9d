"""Helpers of the tests that run real processes: a free port, a quiet JSON request
handler for fake services, and throw-away venvs of other projects' packages (cached
under /tmp between runs)."""

from __future__ import annotations

import fcntl
import json
import shutil
import socket
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
