"""What every durability cell runs over: each backend (the root conftest's
`backend`) x 1 and 4 workers, on a new database dropped after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import server_database_url


@pytest.fixture(params=[1, 4], ids=lambda n: f"{n}-workers")
def workers(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A new, empty database of `backend`, dropped after."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'tally.sqlite'}"
        return
    url, drop = server_database_url(backend)
    try:
        yield url
    finally:
        drop()
