"""What each MySQL or MariaDB connection is told when it opens: short lock waits,
timeouts, and on a Galera node causal reads (`cluster.causal_reads`)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import event

from tally.db import cluster

# Connecting, and each read and write of the connection: 5 s, above what a causal read
# on a busy Galera node waits (2 s cut healthy reads off on a loaded 2-core test
# cluster), so a frozen or cut-off node costs a 503, not a hang. A URL's own
# connect_timeout, read_timeout or write_timeout wins.
MYSQL_TIMEOUTS = {"connect_timeout": 2, "read_timeout": 5, "write_timeout": 5}
# Below the read timeout, so a statement waiting for a row lock that long is told so
# (1205, a race: the write runs again) before its connection counts as lost.
MYSQL_LOCK_WAIT_SECONDS = 1


def session(engine: sa.Engine, sync_wait: int) -> None:
    """Each new connection of `engine`: short lock waits, and the Galera causal-read
    level `sync_wait` (0: none)."""

    @event.listens_for(engine, "connect")
    def _connected(dbapi_conn, _record) -> None:  # noqa: ANN001
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {MYSQL_LOCK_WAIT_SECONDS}")
            cluster.causal_reads(cursor, sync_wait)
        finally:
            cursor.close()
