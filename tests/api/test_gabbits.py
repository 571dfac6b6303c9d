"""HTTP stories as gabbi YAML, `tests/api/gabbits/*.yaml`, one story a file (named
for what it tells, as `inventory-inuse-409.yaml`): each file a test, its requests
run in order by gabbi against the app in process (gabbi's `intercept`, an httpx WSGI
transport) over a fresh SQLite database of its own."""

from __future__ import annotations

import unittest
from pathlib import Path

import pytest
import sqlalchemy as sa
from gabbi import handlers, suitemaker, utils

from tally.config import Settings
from tally.placement.app import create_app

GABBITS = Path(__file__).with_name("gabbits")
STORIES = sorted(GABBITS.glob("*.yaml"))


def test_there_are_stories() -> None:
    assert STORIES


@pytest.mark.parametrize("story", STORIES, ids=[path.stem for path in STORIES])
def test_story(story: Path, sqlite_engine: sa.Engine) -> None:
    app = create_app(Settings.of(), sqlite_engine)
    suite = suitemaker.test_suite_from_dict(
        loader=unittest.TestLoader(),
        test_base_name=story.stem,
        suite_dict=utils.load_yaml(yaml_file=str(story)),
        test_directory=str(GABBITS),
        host="tally",
        port=None,
        fixture_module=None,
        intercept=lambda: app,
        handlers=[handler() for handler in handlers.RESPONSE_HANDLERS],
        test_loader_name=__name__,
    )
    result = unittest.TestResult()
    suite.run(result)
    failed = [f"{test}:\n{trace}" for test, trace in result.failures + result.errors]
    assert not failed, "\n".join(failed)
    assert not result.skipped
    assert result.testsRun == len(utils.load_yaml(yaml_file=str(story))["tests"])
