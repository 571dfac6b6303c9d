"""A database that is a cluster: Galera's causal reads, and whether this node should
take requests now (the health check asks, so a load balancer stops sending to a node
that is syncing, cut off from the Primary Component or not answering)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

# wsrep_sync_wait on Galera: 1 = reads wait for the node to apply what the cluster
# committed before them (causal reads); see causal_reads. A database URL's
# `?wsrep_sync_wait=N` sets another level (0: off, for a single writer node).
GALERA_SYNC_WAIT = 1
SYNC_WAIT_PARAMETER = "wsrep_sync_wait"
_WSREP_ON = "SHOW VARIABLES LIKE 'wsrep_on'"


def sync_wait_level(given: str | tuple[str, ...] | None) -> int:
    """The wsrep_sync_wait level of a URL's parameter (GALERA_SYNC_WAIT if absent)."""
    if given is None:
        return GALERA_SYNC_WAIT
    value = given[-1] if isinstance(given, tuple) else given
    if not value.isdigit() or int(value) > 15:
        raise ValueError(f"wsrep_sync_wait must be an integer 0-15, not {value!r}")
    return int(value)


def causal_reads(cursor: Any, level: int = GALERA_SYNC_WAIT) -> None:
    """On a Galera node, every statement of this connection (its DB-API `cursor`)
    first waits until the node applied every write-set the cluster committed before
    it (`wsrep_sync_wait`): a write acknowledged through another node is seen by the
    very next read here (the index's catch-up, a write's own checks). Elsewhere
    nothing changes."""
    cursor.execute(_WSREP_ON)
    if _galera(cursor.fetchone()):
        cursor.execute(f"SET SESSION wsrep_sync_wait = {int(level)}")


def _galera(wsrep_on: Any) -> bool:
    """Whether the row `_WSREP_ON` read says Galera replication is on (MariaDB has
    the wsrep variables even without it)."""
    return wsrep_on is not None and str(wsrep_on[1]).upper() == "ON"


def cluster_state(engine: sa.Engine) -> str | None:
    """Why this database node should not take requests now (a Galera node that is
    not ready, not in the Primary Component or not synced), or None."""
    if engine.dialect.name not in ("mysql", "mariadb"):
        return None
    names = ("wsrep_ready", "wsrep_cluster_status", "wsrep_local_state_comment")
    query = "SHOW GLOBAL STATUS WHERE Variable_name IN ('" + "', '".join(names) + "')"
    with engine.connect() as conn:
        if not _galera(conn.exec_driver_sql(_WSREP_ON).first()):
            return None
        status = {name.lower(): str(value) for name, value in conn.exec_driver_sql(query)}
    if status.get("wsrep_ready", "").upper() != "ON":
        return "galera node not ready (wsrep_ready=OFF)"
    if status.get("wsrep_cluster_status") != "Primary":
        return f"galera node not in the Primary Component ({status.get('wsrep_cluster_status')})"
    if status.get("wsrep_local_state_comment") != "Synced":
        return f"galera node not synced ({status.get('wsrep_local_state_comment')})"
    return None
