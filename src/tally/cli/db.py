"""`tally db upgrade|version`: schema management by Alembic."""

from __future__ import annotations

import click

from tally.config import load_settings


@click.group()
def db() -> None:
    """Database schema commands."""


@db.command()
@click.option("--config", "config_file", help="A TOML settings file.")
def upgrade(config_file: str | None) -> None:
    """Migrate the database to the newest schema (and sync standard classes/traits)."""
    from tally.db import migrate  # imported here: keeps the operator commands quick
    from tally.db.engine import make_engine
    from tally.placement.ledger.bootstrap import prepare_database

    engine = make_engine(load_settings(config_file).database)
    prepare_database(engine)
    click.echo(f"database at revision {migrate.current_revision(engine)}")


@db.command()
@click.option("--config", "config_file", help="A TOML settings file.")
def version(config_file: str | None) -> None:
    """Print the database's schema revision and the newest one."""
    from tally.db import migrate
    from tally.db.engine import make_engine

    engine = make_engine(load_settings(config_file).database)
    click.echo(f"current {migrate.current_revision(engine)}, head {migrate.head_revision()}")
