"""Alembic environment: run with the connection `tally.db.migrate` hands over."""

from alembic import context

from tally.db import compute_schema  # noqa: F401 - the lab's tables, on the same metadata
from tally.db.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # `alembic` command line: build an engine from the ini URL
    from tally.db.engine import make_engine

    connection = make_engine(context.config.get_main_option("sqlalchemy.url")).connect()

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
