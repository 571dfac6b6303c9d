"""A mixed write load against a live Tally, the books of what it acknowledged, and
the database read alone afterwards.

Every object the load writes has one writer thread, so what an acknowledged write
leaves is known exactly: a consumer's allocations, a host's VCPU total, whether a
provider of the churn exists. A write that got no answer (the server stopped under
it) may have landed or not: both states are allowed for that object, and nothing
else. Each provider generation an answer showed is a floor for the stored one.

    load = LedgerLoad(url, hosts)          # hosts: made once, with `make_hosts`
    load.run(seconds, stop=...)            # threads write until `stop()` returns
    problems(load.books, engine)           # [] when the database holds every ack
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import sqlalchemy as sa

from tally.db import schema as t

HEADERS = {
    "x-auth-token": "admin",
    "openstack-api-version": "placement 1.39",
    # a new connection each request: the kernel spreads them over every worker
    "connection": "close",
}
HOST_VCPU = 64
Allocation = tuple[tuple[str, str, int], ...]  # ((provider uuid, class, amount), ...)
GONE: Allocation = ()
FAILURES: list[str] = []  # every 5xx answer of this process's loads


@dataclass
class Books:
    """What the server acknowledged: for each object, the states it may be in now."""

    consumers: dict[str, set[Allocation]] = field(default_factory=dict)
    totals: dict[str, set[int]] = field(default_factory=dict)  # host -> VCPU total
    churn: dict[str, set[bool]] = field(default_factory=dict)  # provider -> exists
    generations: dict[str, int] = field(default_factory=dict)  # provider -> floor
    acknowledged: int = 0
    refused: int = 0
    unanswered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw_generation(self, provider: str, generation: int | None) -> None:
        if generation is not None:
            with self.lock:
                self.generations[provider] = max(self.generations.get(provider, -1), generation)

    def settle(self, states: dict, key: str, before: object, after: object, status: int | None):
        """Note one write's outcome: answered 2xx (`after`), refused (4xx: `before`
        stays), or unanswered (either)."""
        with self.lock:
            if status is None:
                self.unanswered += 1
                states[key] = {*states.get(key, {before}), after}
            elif 200 <= status < 300:
                self.acknowledged += 1
                states[key] = {after}
            else:
                self.refused += 1
                states.setdefault(key, {before})


def make_hosts(url: str, count: int) -> list[str]:
    """`count` providers of `HOST_VCPU` VCPU and 64 GiB each; their uuids."""
    hosts = []
    with httpx.Client(base_url=url, headers=HEADERS, timeout=30, trust_env=False) as http:
        for n in range(count):
            rp = str(uuid.uuid4())
            http.post("/resource_providers", json={"name": f"host-{n}-{rp[:8]}", "uuid": rp})
            answer = http.put(
                f"/resource_providers/{rp}/inventories",
                json={
                    "resource_provider_generation": 0,
                    "inventories": {"VCPU": {"total": HOST_VCPU}, "MEMORY_MB": {"total": 65536}},
                },
            )
            assert answer.status_code == 200, answer.text
            hosts.append(rp)
    return hosts


class LedgerLoad:
    """Claimers, one inventory writer and one provider churner, writing at once."""

    def __init__(self, url: str, hosts: list[str], books: Books | None = None) -> None:
        self.url, self.hosts = url, hosts
        self.books = books or Books(totals={h: {HOST_VCPU} for h in hosts})
        self.errors: list[str] = []

    def run(self, claimers: int, stop: Callable[[], bool]) -> None:
        """Write from `claimers` + 2 threads until `stop()` is true (asked between
        requests); returns when every thread has ended."""
        jobs = [self._claims] * claimers + [self._inventories, self._churn]
        threads = [
            threading.Thread(target=self._guarded, args=(job, seed, stop), daemon=True)
            for seed, job in enumerate(jobs)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not self.errors, self.errors

    def _guarded(self, job: Callable, seed: int, stop: Callable[[], bool]) -> None:
        try:
            with httpx.Client(
                base_url=self.url, headers=HEADERS, timeout=20, trust_env=False
            ) as http:
                job(http, random.Random(seed * 7919 + int(time.time())), stop)
        except Exception as exc:  # a bug of the load itself: the test says so
            self.errors.append(f"{job.__name__}: {exc!r}")

    def _send(self, http: httpx.Client, method: str, path: str, **kw: object):
        """The answer, or None when there was none (the server went under it)."""
        try:
            return http.request(method, path, **kw)
        except httpx.TransportError:
            return None

    def _claims(self, http: httpx.Client, rng: random.Random, stop: Callable[[], bool]) -> None:
        books, held = self.books, []
        while not stop():
            if held and rng.random() < 0.3:
                consumer = held.pop(rng.randrange(len(held)))
                (before,) = books.consumers[consumer]
                answer = self._send(http, "DELETE", f"/allocations/{consumer}")
                books.settle(books.consumers, consumer, before, GONE, _status(answer))
                continue
            consumer, host = str(uuid.uuid4()), rng.choice(self.hosts)
            vcpu, memory = rng.randint(1, 4), rng.choice((512, 1024, 2048))
            body = {
                "allocations": {host: {"resources": {"VCPU": vcpu, "MEMORY_MB": memory}}},
                "project_id": "durability",
                "user_id": "load",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            after = tuple(sorted(((host, "MEMORY_MB", memory), (host, "VCPU", vcpu))))
            answer = self._send(http, "PUT", f"/allocations/{consumer}", json=body)
            books.settle(books.consumers, consumer, GONE, after, _status(answer))
            if answer is not None and answer.status_code == 204:
                held.append(consumer)

    def _inventories(
        self, http: httpx.Client, rng: random.Random, stop: Callable[[], bool]
    ) -> None:
        books = self.books
        while not stop():
            host = rng.choice(self.hosts)
            seen = self._send(http, "GET", f"/resource_providers/{host}/inventories")
            if seen is None or seen.status_code != 200:
                continue
            generation = seen.json()["resource_provider_generation"]
            books.saw_generation(host, generation)
            (before,) = books.totals[host] if len(books.totals[host]) == 1 else (None,)
            if before is None:
                continue  # an unanswered change left two possible totals: leave it be
            total = rng.randint(HOST_VCPU - 24, HOST_VCPU + 24)
            body = {
                "resource_provider_generation": generation,
                "inventories": {"VCPU": {"total": total}, "MEMORY_MB": {"total": 65536}},
            }
            answer = self._send(http, "PUT", f"/resource_providers/{host}/inventories", json=body)
            books.settle(books.totals, host, before, total, _status(answer))
            if answer is not None and answer.status_code == 200:
                books.saw_generation(host, answer.json()["resource_provider_generation"])

    def _churn(self, http: httpx.Client, rng: random.Random, stop: Callable[[], bool]) -> None:
        """Providers made, given inventory, deleted, and made again with the same uuid."""
        books, mine = self.books, [str(uuid.uuid4()) for _ in range(3)]
        while not stop():
            rp = rng.choice(mine)
            states = books.churn.get(rp, {False})
            if len(states) != 1:
                mine.remove(rp)  # unknown after an unanswered write: a fresh one instead
                mine.append(str(uuid.uuid4()))
                continue
            (exists,) = states
            if exists:
                with books.lock:  # made again, it starts from generation 0
                    books.generations.pop(rp, None)
                answer = self._send(http, "DELETE", f"/resource_providers/{rp}")
                books.settle(books.churn, rp, True, False, _status(answer))
            else:
                body = {"name": f"churn-{rp}", "uuid": rp}
                answer = self._send(http, "POST", "/resource_providers", json=body)
                books.settle(books.churn, rp, False, True, _status(answer))
                if answer is not None and answer.status_code == 200:
                    books.saw_generation(rp, answer.json()["generation"])


def _status(answer: httpx.Response | None) -> int | None:
    """The status, or None when the write's outcome is unknown (no answer). A 503
    says nothing was written, as any refusal; every 5xx is noted as a failure."""
    if answer is None:
        return None
    if answer.status_code >= 500:
        FAILURES.append(
            f"{answer.status_code} {answer.request.method} "
            f"{answer.request.url.path}: {answer.text[:300]}"
        )
    return answer.status_code


def stored(engine: sa.Engine) -> tuple[dict, dict, dict]:
    """What the database holds: allocations per consumer, VCPU totals and
    generations per provider uuid."""
    rp, rc = t.resource_providers, t.resource_classes
    with engine.connect() as conn:
        uuids = dict(conn.execute(sa.select(rp.c.id, rp.c.uuid)).all())
        generations = dict(conn.execute(sa.select(rp.c.uuid, rp.c.generation)).all())
        classes = dict(conn.execute(sa.select(rc.c.id, rc.c.name)).all())
        held: dict[str, list] = {}
        rows = conn.execute(
            sa.select(
                t.allocations.c.consumer_id,
                t.allocations.c.resource_provider_id,
                t.allocations.c.resource_class_id,
                t.allocations.c.used,
            )
        )
        for consumer, provider, klass, used in rows:
            held.setdefault(consumer, []).append(
                (uuids.get(provider, f"#{provider}"), classes[klass], used)
            )
        vcpu = next(i for i, name in classes.items() if name == "VCPU")
        totals = dict(
            conn.execute(
                sa.select(rp.c.uuid, t.inventories.c.total)
                .join(t.inventories, t.inventories.c.resource_provider_id == rp.c.id)
                .where(t.inventories.c.resource_class_id == vcpu)
            ).all()
        )
    consumers = {c: tuple(sorted(rows)) for c, rows in held.items()}
    return consumers, totals, generations


def problems(books: Books, engine: sa.Engine) -> list[str]:
    """Each way the database differs from what was acknowledged (empty: none)."""
    consumers, totals, generations = stored(engine)
    found = []
    for consumer, states in books.consumers.items():
        if consumers.get(consumer, GONE) not in states:
            found.append(
                f"consumer {consumer}: stored {consumers.get(consumer, GONE)}, "
                f"acknowledged {sorted(states)}"
            )
    for consumer in set(consumers) - set(books.consumers):
        found.append(f"consumer {consumer} stored, never claimed: {consumers[consumer]}")
    for host, states in books.totals.items():
        if totals.get(host) not in states:
            found.append(f"host {host}: VCPU total {totals.get(host)}, acknowledged {states}")
    for rp, states in books.churn.items():
        if (rp in generations) not in states:
            found.append(f"provider {rp}: exists={rp in generations}, acknowledged {states}")
    for rp, floor in books.generations.items():
        if rp in generations and generations[rp] < floor:
            found.append(f"provider {rp}: generation {generations[rp]} went back from {floor}")
    return found
