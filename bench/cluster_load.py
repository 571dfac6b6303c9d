"""A Placement workload through several API hosts over one clustered database, and
the checks that judge it: claims, deletes and `reserved` changes from many clients,
then every provider's usage against its capacity (oversubscription), every
acknowledged claim and delete against the books (lost writes), and a probe of
coherence across hosts (claim through one, ask for candidates through another
right after the acknowledgement).

Used by bench/cluster.py (the benchmark, Tally and upstream side by side) and by
tests/cluster (a reduced run in the test command). Only the public API is used, so
it runs against any Placement.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import threading
import time
import uuid as uuidlib

import httpx

VERSION = "placement 1.39"
HEADERS = {"openstack-api-version": VERSION, "x-auth-token": "admin", "accept": "application/json"}
VCPU_TOTAL = 16


def client(url: str, timeout: float = 30.0) -> httpx.Client:
    return httpx.Client(base_url=url, headers=HEADERS, timeout=timeout)


@dataclasses.dataclass
class Books:
    """What the clients were told: acknowledged claims (consumer -> provider) and
    acknowledged deletes; requests whose outcome is unknown (a 5xx, a timeout)."""

    claimed: dict[str, str] = dataclasses.field(default_factory=dict)
    deleted: set[str] = dataclasses.field(default_factory=set)
    unknown: set[str] = dataclasses.field(default_factory=set)
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    server_errors: list[str] = dataclasses.field(default_factory=list)
    latencies: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def note(self, kind: str, status: int, seconds: float, body: str = "") -> None:
        with self.lock:
            self.statuses[(kind, status)] += 1
            self.latencies[kind].append(seconds)
            if status >= 500 and len(self.server_errors) < 20:
                self.server_errors.append(f"{kind} {status} {body[:200]}")

    def count(self, kind: str, status: int | None = None) -> int:
        return sum(
            n
            for (k, s), n in self.statuses.items()
            if k == kind and (status is None or s == status)
        )

    @property
    def five_xx(self) -> int:
        return sum(n for (_, s), n in self.statuses.items() if s >= 500 or s == 0)


def seed(url: str, providers: int, prefix: str = "cl") -> list[str]:
    """`providers` compute nodes with VCPU_TOTAL VCPU at ratio 1.0."""
    made = []
    with client(url) as http:
        for i in range(providers):
            uuid = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{prefix}-{i}"))
            resp = http.post("/resource_providers", json={"name": f"{prefix}-{i}", "uuid": uuid})
            assert resp.status_code in (200, 201, 409), resp.text
            inventory = {
                "resource_provider_generation": http.get(f"/resource_providers/{uuid}").json()[
                    "generation"
                ],
                "inventories": {"VCPU": {"total": VCPU_TOTAL, "allocation_ratio": 1.0}},
            }
            resp = http.put(f"/resource_providers/{uuid}/inventories", json=inventory)
            assert resp.status_code == 200, resp.text
            made.append(uuid)
    return made


def _claim_body(provider: str) -> dict:
    return {
        "allocations": {provider: {"resources": {"VCPU": 1}}},
        "consumer_generation": None,
        "project_id": "bench",
        "user_id": "bench",
        "consumer_type": "INSTANCE",
    }


BACKOFF = 0.1  # seconds a client waits after a 5xx or no answer, as a real one would


def _request(
    http: httpx.Client, books: Books, kind: str, method: str, path: str, **kw
) -> httpx.Response | None:
    """One request, noted in the books (None: no answer)."""
    started = time.monotonic()
    try:
        resp = http.request(method, path, **kw)
        status, body = resp.status_code, resp.text
    except httpx.HTTPError as exc:
        resp, status, body = None, 0, repr(exc)
    books.note(kind, status, time.monotonic() - started, body)
    if status >= 500 or status == 0:
        time.sleep(BACKOFF)
    return resp


def _send(http: httpx.Client, books: Books, kind: str, method: str, path: str, **kw) -> int:
    resp = _request(http, books, kind, method, path, **kw)
    return resp.status_code if resp is not None else 0


def _read(http: httpx.Client, books: Books, path: str) -> dict | None:
    """GET `path` (noted in the books as a `read`): its body, or None unless 200."""
    resp = _request(http, books, "read", "GET", path)
    return resp.json() if resp is not None and resp.status_code == 200 else None


def _worker(
    url: str,
    providers: list[str],
    books: Books,
    stop: float,
    rng: random.Random,
    hold: int,
    until: threading.Event,
) -> None:
    """Claims (each VCPU:1 for a new consumer), deletes of its own claims and
    `reserved` changes; a client holds at most `hold` claims, so the providers stay
    about half full and claims test the write path, not a full cloud's 409s."""
    mine: list[str] = []
    with client(url) as http:
        while time.monotonic() < stop and not until.is_set():
            roll = rng.random()
            if mine and (roll < 0.25 or len(mine) >= hold):
                consumer = mine.pop(rng.randrange(len(mine)))
                status = _send(http, books, "delete", "DELETE", f"/allocations/{consumer}")
                with books.lock:
                    if status == 204:
                        books.deleted.add(consumer)
                    elif status >= 500 or status == 0:
                        books.unknown.add(consumer)
            elif roll < 0.33:
                provider = rng.choice(providers)
                path = f"/resource_providers/{provider}/inventories/VCPU"
                got = _read(http, books, path)
                if got is None:
                    continue
                body = {
                    "resource_provider_generation": got["resource_provider_generation"],
                    "total": VCPU_TOTAL,
                    "reserved": rng.randrange(0, 3),
                    "allocation_ratio": 1.0,
                }
                _send(http, books, "reserved", "PUT", path, json=body)
            else:
                consumer, provider = str(uuidlib.uuid4()), rng.choice(providers)
                status = _send(
                    http,
                    books,
                    "claim",
                    "PUT",
                    f"/allocations/{consumer}",
                    json=_claim_body(provider),
                )
                with books.lock:
                    if status == 204:
                        books.claimed[consumer] = provider
                        mine.append(consumer)
                    elif status >= 500 or status == 0:
                        books.unknown.add(consumer)


def run(
    urls: list[str],
    providers: list[str],
    *,
    clients: int,
    seconds: float,
    disjoint: bool,
    seed_value: int = 7,
    until: threading.Event | None = None,
) -> tuple[Books, float]:
    """`clients` threads for `seconds` (or until `until` is set), client i through
    urls[i % len(urls)]; with `disjoint` each client works on its own share of the
    providers, else all on all (hot). The books, and the wall time taken."""
    books = Books()
    until = until or threading.Event()
    stop = time.monotonic() + seconds
    threads = []
    for i in range(clients):
        mine = disjoint and len(providers) >= clients
        share = providers[i::clients] if mine else providers
        hold = max(1, len(share) * VCPU_TOTAL // (2 if mine else 2 * clients))
        rng = random.Random(seed_value * 1000 + i)
        thread = threading.Thread(
            target=_worker,
            args=(urls[i % len(urls)], share, books, stop, rng, hold, until),
            daemon=True,
        )
        threads.append(thread)
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return books, time.monotonic() - started


@dataclasses.dataclass
class Verdict:
    oversubscribed: list[str]
    lost_claims: list[str]
    undeleted: list[str]

    @property
    def clean(self) -> bool:
        return not (self.oversubscribed or self.lost_claims or self.undeleted)


def verify(url: str, providers: list[str], books: Books) -> Verdict:
    """The books after the run, read through `url`."""
    over, lost, undeleted = [], [], []
    with client(url) as http:
        for provider in providers:
            inventory = http.get(f"/resource_providers/{provider}/inventories").json()
            vcpu = inventory["inventories"]["VCPU"]
            capacity = (vcpu["total"] - vcpu["reserved"]) * vcpu["allocation_ratio"]
            used = http.get(f"/resource_providers/{provider}/usages").json()["usages"]["VCPU"]
            if used > capacity:
                over.append(f"{provider}: {used} used of {capacity}")
        for consumer, provider in books.claimed.items():
            if consumer in books.unknown:  # a delete whose outcome nobody was told
                continue
            answer = http.get(f"/allocations/{consumer}")
            assert answer.status_code == 200, f"reading {consumer}: {answer.text}"
            held = answer.json()["allocations"]
            if consumer in books.deleted:
                if held:
                    undeleted.append(consumer)
            elif held.get(provider, {}).get("resources") != {"VCPU": 1}:
                lost.append(consumer)
    return Verdict(over, lost, undeleted)


def coherence_probe(write_url: str, read_url: str, provider: str, rounds: int) -> tuple[int, int]:
    """(stale answers, rounds*2): fill `provider` to its last VCPU through
    `write_url`, then right after each acknowledgement ask `read_url` whether one
    VCPU fits there (it must not after the claim, it must after the delete)."""
    stale = 0
    query = {"resources": "VCPU:1", "in_tree": provider}
    with client(write_url) as writer, client(read_url) as reader:
        inventory = writer.get(f"/resource_providers/{provider}/inventories/VCPU").json()
        capacity = int((inventory["total"] - inventory["reserved"]) * inventory["allocation_ratio"])
        used = writer.get(f"/resource_providers/{provider}/usages").json()["usages"].get("VCPU", 0)
        filler = []
        for _ in range(capacity - used - 1):  # leave exactly one VCPU free
            consumer = str(uuidlib.uuid4())
            assert (
                writer.put(f"/allocations/{consumer}", json=_claim_body(provider)).status_code
                == 204
            )
            filler.append(consumer)
        for _ in range(rounds):
            consumer = str(uuidlib.uuid4())
            resp = writer.put(f"/allocations/{consumer}", json=_claim_body(provider))
            assert resp.status_code == 204, resp.text
            found = reader.get("/allocation_candidates", params=query).json()
            stale += bool(found["allocation_requests"])  # the last VCPU is taken
            assert writer.delete(f"/allocations/{consumer}").status_code == 204
            found = reader.get("/allocation_candidates", params=query).json()
            stale += not found["allocation_requests"]  # and free again
        for consumer in filler:
            writer.delete(f"/allocations/{consumer}")
    return stale, rounds * 2


def summary(books: Books, wall: float) -> dict:
    """Figures of one run."""

    def p95(values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[int(0.95 * (len(ordered) - 1))] * 1000 if ordered else 0.0

    return {
        "claims_ok_per_s": round(books.count("claim", 204) / wall, 1),
        "claims_ok": books.count("claim", 204),
        "claims_409": books.count("claim", 409),
        "deletes_ok": books.count("delete", 204),
        "reserved_ok": books.count("reserved", 200),
        "reserved_409": books.count("reserved", 409),
        "writes_per_s": round(
            (books.count("claim", 204) + books.count("delete", 204) + books.count("reserved", 200))
            / wall,
            1,
        ),
        "5xx": books.five_xx,
        "claim_p95_ms": round(p95(books.latencies["claim"]), 1),
    }
