"""Settings checked before `tally serve` (and the WSGI entry) touch anything, each
refused in one line with the exit status of docs/reference.md's table: a port out
of 1-65535 (99999 listened on 34463 while the log said 99999) and fewer than one
worker are bad input (127); a data folder this process cannot write (it read as
"cannot reach database") and a port another server listens on (a second server
announced it served, then failed) are 1, said before anything says it serves."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tally.cli.main import cli


def serve(tmp_path: Path, *args: str, **env: str):
    return CliRunner().invoke(
        cli, ["serve", *args], env={"TALLY_DATA_DIR": str(tmp_path / "data"), **env}
    )


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--port", "99999"], {}, "setting port must be from 1 to 65535, not 99999"),
        ([], {"TALLY_PORT": "0"}, "setting port must be from 1 to 65535, not 0"),
        (["--workers", "0"], {}, "setting workers must be at least 1, not 0"),
        ([], {"TALLY_WORKERS": "-2"}, "setting workers must be at least 1, not -2"),
    ],
)
def test_a_port_or_worker_count_out_of_range_is_bad_input(tmp_path, args, env, line):
    result = serve(tmp_path, *args, **env)
    assert result.exit_code == 127
    assert result.output == f"Error: cannot read the settings: {line}\n"
    assert not (tmp_path / "data").exists()  # nothing touched


@contextlib.contextmanager
def listening() -> Iterator[int]:
    """A port another server listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_busy_port_fails_in_one_line_before_anything_says_it_serves(tmp_path):
    with listening() as port:
        result = serve(tmp_path, "--port", str(port))
    assert result.exit_code == 1
    assert result.output == (
        f"Error: cannot listen on 127.0.0.1:{port}: port in use (another server listens "
        "there); stop it, or choose another port (--port, TALLY_PORT)\n"
    )
    assert not (tmp_path / "data").exists()  # failed before the database was touched


@contextlib.contextmanager
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder this process cannot write: a read-only tmpfs for root (whom file
    modes do not stop), a folder of mode 0555 for anyone else."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"root needs a read-only mount here, and mount says: {mounted.stderr}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def unwritable(folder: Path) -> str:
    return (
        f"the data folder {folder} is not writable by this process (uid {os.geteuid()}): "
        "the SQLite database tally.sqlite and its -wal file live there; make it "
        "writable, or choose another folder: data_dir (TALLY_DATA_DIR), or a sqlite:/// "
        "database_url"
    )


def test_a_read_only_data_folder_is_said_so_by_serve_and_db_upgrade(tmp_path):
    with read_only_folder(tmp_path) as folder:
        result = serve(tmp_path, "--port", "1", TALLY_DATA_DIR=str(folder))
        assert result.exit_code == 1
        assert result.output == f"Error: {unwritable(folder)}\n"
        result = CliRunner().invoke(cli, ["db", "upgrade"], env={"TALLY_DATA_DIR": str(folder)})
        assert (result.exit_code, result.output) == (1, f"Error: {unwritable(folder)}\n")
        made = folder / "tally-data"  # one to make there: its parent is named
        result = CliRunner().invoke(cli, ["db", "upgrade"], env={"TALLY_DATA_DIR": str(made)})
        assert result.exit_code == 1
        assert result.output.startswith(
            f"Error: the data folder {made} cannot be made: {folder} is not writable"
        )


def test_a_read_only_data_folder_stops_the_wsgi_entry_in_one_line(tmp_path):
    with read_only_folder(tmp_path) as folder:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
        done = subprocess.run(
            [sys.executable, "-c", "import tally.serve.wsgi"],
            env={**env, "TALLY_DATA_DIR": str(folder)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"tally.db.errors.UnusableDatabase: {unwritable(folder)}"
    )
