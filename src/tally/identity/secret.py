"""The key that signs lab tokens: one random value kept in the `lab_secrets` table, so
every worker process (and a restarted server) accepts the same tokens."""

from __future__ import annotations

import secrets

import sqlalchemy as sa

from tally.db.compute_schema import lab_secrets
from tally.db.transaction import transaction

TOKEN_KEY = "token_key"


def token_key(engine: sa.Engine) -> bytes:
    """The signing key, made on first use (the first writer wins a race)."""
    query = sa.select(lab_secrets.c.value).where(lab_secrets.c.name == TOKEN_KEY)
    with transaction(engine) as conn:
        found = conn.execute(query).scalar()
    if found is None:
        with transaction(engine, write=True) as conn:
            found = conn.execute(query).scalar()
            if found is None:
                found = secrets.token_hex(32)
                conn.execute(lab_secrets.insert().values(name=TOKEN_KEY, value=found))
    return bytes.fromhex(found)
