"""Fixtures of the database tests: new empty databases on the test's backend, and
Tally's database holding tests/e2e/placement_books' cloud (for moves and imports)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tally.config import Settings
from tally.placement.app import create_app
from tests.conftest import server_database_url
from tests.e2e import placement_books as books


def transport(engine: sa.Engine, **settings: object) -> httpx.WSGITransport:
    return httpx.WSGITransport(app=create_app(Settings.of(**settings), engine))


@pytest.fixture
def new_database(backend: str, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """new_database(name): the URL of a new, empty database on the test's backend."""
    drops = []

    def make(name: str) -> str:
        if backend == "sqlite":
            (tmp_path / "moved").mkdir(exist_ok=True)
            return f"sqlite:///{tmp_path / 'moved' / name}.sqlite"
        url, drop = server_database_url(backend)
        drops.append(drop)
        return url

    yield make
    for drop in drops:
        drop()


@pytest.fixture
def populated(engine: sa.Engine) -> sa.Engine:
    """Tally's database holding placement_books' cloud (cn3 left over capacity)."""
    books.populate(books.Api("http://tally", transport(engine, over_capacity="allow")))
    return engine
