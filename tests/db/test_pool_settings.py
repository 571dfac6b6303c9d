"""The connection budget's settings reach the pools: `database_max_pool_size`,
`database_max_overflow` and `database_pool_timeout` (from the environment, a TOML
file or placement.conf's `[placement_database]`) size the pool of the engine every
app of the composed server shares, and PostgreSQL's autocommit read pool stays
within them."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tally.config import load_settings, unused_placement_options
from tally.db.autocommit_reads import readers_of
from tally.db.engine import engine_for
from tally.db.mysql import BoundedPool
from tally.serve.compose import create_server

# Nothing listens on port 1: the engine is built (a database that is down only now
# passes, as the WSGI app's does), and its pool is what is looked at.
DOWN = {
    "postgresql": "postgresql+psycopg://placement:pw@127.0.0.1:1/placement",
    "mysql": "mysql+pymysql://placement:pw@127.0.0.1:1/placement",
}


def limits(engine: sa.Engine) -> tuple[int, int, float]:
    pool = engine.pool
    return pool.size(), pool._max_overflow, pool.timeout()


def placement_conf(tmp_path, url: str) -> str:
    conf = tmp_path / "placement.conf"
    conf.write_text(
        f"[placement_database]\nconnection = {url}\n"
        "max_pool_size = 3\nmax_overflow = 2\npool_timeout = 7\n"
    )
    return str(conf)


@pytest.mark.parametrize("kind", DOWN)
def test_placement_conf_sizes_the_pool_of_the_composed_server(tmp_path, kind):
    conf = placement_conf(tmp_path, DOWN[kind])
    settings = load_settings(placement_conf=conf, environ={})
    assert unused_placement_options(conf) == []  # read now, no longer warned about
    server = create_server(settings)
    try:
        assert limits(server.engine) == (3, 2, 7)
        if kind == "mysql":  # the pool whose waits draw on the request's budget
            assert isinstance(server.engine.pool, BoundedPool)
            assert server.engine.pool._own_timeout == 7
    finally:
        server.engine.dispose()


def test_the_environment_wins_and_the_defaults_are_todays(tmp_path):
    conf = placement_conf(tmp_path, DOWN["postgresql"])
    env = {"TALLY_DATABASE_MAX_POOL_SIZE": "5", "TALLY_DATABASE_POOL_TIMEOUT": "2"}
    engine = engine_for(load_settings(placement_conf=conf, environ=env))
    assert limits(engine) == (5, 2, 2)
    engine.dispose()
    engine = engine_for(load_settings(environ={"TALLY_DATABASE_URL": DOWN["postgresql"]}))
    assert limits(engine) == (10, 20, 30)
    engine.dispose()


@pytest.mark.parametrize(
    ("env", "kept", "more"),
    [
        ({}, 4, 12),
        ({"TALLY_DATABASE_MAX_POOL_SIZE": "2", "TALLY_DATABASE_MAX_OVERFLOW": "1"}, 2, 1),
    ],
)
def test_postgresql_autocommit_reads_stay_within_the_pool_settings(env, kept, more):
    settings = load_settings(environ={"TALLY_DATABASE_URL": DOWN["postgresql"], **env})
    engine = engine_for(settings)
    readers = readers_of(engine)
    assert readers is not None
    assert (readers.pool.size(), readers.pool._max_overflow) == (kept, more)
    assert readers.pool.timeout() == settings.database_pool_timeout
    engine.dispose()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TALLY_DATABASE_MAX_POOL_SIZE", "0", "database_max_pool_size must be at least 1, not 0"),
        ("TALLY_DATABASE_MAX_OVERFLOW", "-1", "database_max_overflow must be at least 0, not -1"),
        ("TALLY_DATABASE_POOL_TIMEOUT", "0", "database_pool_timeout must be at least 1, not 0"),
    ],
)
def test_a_pool_without_bounds_is_refused_naming_the_setting(name, value, message):
    with pytest.raises(ValueError, match=message):
        load_settings(environ={name: value})
