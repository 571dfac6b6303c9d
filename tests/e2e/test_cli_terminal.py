"""What `tally audit` and `tally history` print in an 80-column terminal (issue 40,
item 8): run in a pseudo-terminal of 80x24 against a live `tally serve`, as an operator
sees them. Before, one orphan took 56 lines and its `fix` (the command to copy) was cut
into 6-character pieces, and nothing found printed an empty 9-column table.

Now no line is wider than the terminal, each fix is whole on one line, a row is a
handful of lines (records, as the default columns need more than 80 with a uuid and
a 76-character fix), and nothing found is a sentence.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator

import pytest

from tests.live import tally_serve

pytestmark = pytest.mark.slow

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
TALLY = [sys.executable, "-c", "from tally.cli.main import cli; cli()"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with tally_serve(tmp_path_factory.mktemp("terminal")) as url:
        yield url


def tally(url: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TALLY_URL=url)
    return subprocess.run([*TALLY, *args], env=env, capture_output=True, text=True, timeout=120)


def on_terminal(url: str, *args: str, columns: int = 80) -> tuple[int, list[str]]:
    """Run `tally ARGS` with stdout on a pseudo-terminal `columns` wide (stderr, its
    progress bar and summary, apart): its exit status and the lines a person sees
    (colours removed)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TALLY_URL=url, TERM="xterm-256color")
    proc = subprocess.Popen(
        [*TALLY, *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the other end is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    status = proc.wait(timeout=120)
    text = ANSI.sub("", b"".join(chunks).decode())
    seen = [line.split("\r")[-1].rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return status, [line for line in seen if line]


def test_audit_and_history_read_in_80_columns(live: str) -> None:
    assert tally(live, "lab", "up").returncode == 0
    status, lines = on_terminal(live, "audit")
    assert (status, lines) == (
        0,
        ["Nothing found: every consumer and server checked is accounted for."],
    )

    orphan = tally(live, "lab", "break", "delete-while-down", "-f", "value", "-c", "server")
    assert orphan.returncode == 0, orphan.stderr
    fix = tally(live, "audit", "-f", "value", "-c", "fix").stdout.strip()
    assert fix.startswith("tally audit --provider ") and len(fix) > 70

    status, lines = on_terminal(live, "audit")
    assert status == 3
    assert max(map(len, lines)) <= 80, lines
    assert fix in [line.strip() for line in lines]  # whole, on a line of its own
    assert orphan.stdout.strip() in " ".join(lines)
    assert len(lines) <= 5, lines  # one block: consumer, kind, host, fix

    status, lines = on_terminal(live, "history", orphan.stdout.strip())
    assert status == 0 and max(map(len, lines)) <= 80, lines
    assert len(lines) == 2 + 3, lines  # a header, its rule, one line per class claimed

    status, lines = on_terminal(live, "history", "--provider", "lab-compute-1", "--limit", "2")
    assert status == 0 and max(map(len, lines)) <= 80, lines

    status, lines = on_terminal(live, "history", "--since", "1s", "--until", "1s")
    assert (status, lines) == (0, ["No change recorded matches."])
