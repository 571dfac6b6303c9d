"""Failed searches, GET /tally/v1/failures: records noted through a Recorder over the
app's database (the candidates handler's hook comes later), read back through the
API: every field, the filters (request id or global request id, time, class and
trait named by the query), paging, admin only, 400s naming the parameter, and
retention by rows and by days. On every backend of the suite.

The records most tests note (oldest first):

    1  req-a / global-1   resources=VCPU:4,MEMORY_MB:8192&required=HW_CPU_X86_AVX2
    2  req-b / global-1   resources1=CUSTOM_GPU:1&required1=!COMPUTE_STATUS_DISABLED
    3  req-c / global-2   resources=DISK_GB:10&required=in:HW_CPU_X86_AVX,CUSTOM_X
    4  req-d / -          resources=VCPU:1&root_required=CUSTOM_ROOT (1.35)
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import sqlalchemy as sa

from tally.config import Settings
from tally.counts import registry
from tally.db import schema as t
from tally.db.transaction import transaction
from tally.placement.app import create_app
from tally.placement.ledger import failure_records as failures
from tally.placement.ledger.failure_records import FailureNote, Recorder
from tests.live import wait_until

PATH = "/tally/v1/failures"
START = dt.datetime(2026, 12, 1, 12, 0, 0)
QUERIES = (
    ("req-a", "global-1", "resources=VCPU:4,MEMORY_MB:8192&required=HW_CPU_X86_AVX2"),
    ("req-b", "global-1", "resources1=CUSTOM_GPU:1&required1=!COMPUTE_STATUS_DISABLED"),
    ("req-c", "global-2", "resources=DISK_GB:10&required=in:HW_CPU_X86_AVX,CUSTOM_X"),
    ("req-d", None, "resources=VCPU:1&root_required=CUSTOM_ROOT"),
)
VERDICT = {"constraints": [{"constraint": "VCPU", "rules_out": 3}], "closest": []}


def note(request_id: str, global_id: str | None, query: str, minutes: int = 0) -> FailureNote:
    return FailureNote(
        created_at=START + dt.timedelta(minutes=minutes),
        request_id=request_id,
        global_request_id=global_id,
        user_id="alice",
        project_id="demo",
        microversion="1.39",
        query=query,
        reason="capacity",
        verdict=VERDICT,
    )


def write(engine: sa.Engine, *notes: FailureNote) -> None:
    """Note each through a Recorder over `engine`, and stop it (which writes them)."""
    recorder = Recorder(engine)
    for one in notes:
        assert recorder.note(one)
    recorder.stop()
    assert not recorder.running


def ids(answer) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [r["request_id"] for r in answer.json["failures"]]


@pytest.fixture
def noted(engine: sa.Engine) -> sa.Engine:
    write(engine, *(note(*q, minutes=i) for i, q in enumerate(QUERIES)))
    return engine


def test_every_field_newest_first(api, noted):
    found = api().simulate_get(PATH)
    assert ids(found) == ["req-d", "req-c", "req-b", "req-a"]
    oldest = found.json["failures"][-1]
    assert oldest == {
        "id": oldest["id"],
        "created_at": "2026-12-01T12:00:00.000000Z",
        "request_id": "req-a",
        "global_request_id": "global-1",
        "user_id": "alice",
        "project_id": "demo",
        "microversion": "1.39",
        "query": QUERIES[0][2],
        "reason": "capacity",
        "verdict": VERDICT,
    }
    assert found.json["next_marker"] is None


def test_a_request_id_matches_either_id(api, noted):
    client = api()
    assert ids(client.simulate_get(PATH, params={"request_id": "req-c"})) == ["req-c"]
    assert ids(client.simulate_get(PATH, params={"request_id": "global-1"})) == [
        "req-b",
        "req-a",
    ]
    assert ids(client.simulate_get(PATH, params={"request_id": "req-zzz"})) == []


def test_since_and_until(api, noted):
    client = api()
    since = {"since": "2026-12-01T12:02:00"}  # inclusive
    assert ids(client.simulate_get(PATH, params=since)) == ["req-d", "req-c"]
    until = {"until": "2026-12-01T12:01:00Z"}  # exclusive
    assert ids(client.simulate_get(PATH, params=until)) == ["req-a"]
    offset = {"since": "2026-12-01T13:01:00+01:00", "until": "2026-12-01T12:03:00"}
    assert ids(client.simulate_get(PATH, params=offset)) == ["req-c", "req-b"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"resource_class": "VCPU"}, ["req-d", "req-a"]),
        ({"resource_class": "CUSTOM_GPU"}, ["req-b"]),  # a granular group's
        ({"resource_class": "MEMORY_MB"}, ["req-a"]),
        ({"resource_class": "MEMORY"}, []),  # in the text, not a class of the query
        ({"trait": "HW_CPU_X86_AVX"}, ["req-c"]),  # not req-a's HW_CPU_X86_AVX2
        ({"trait": "COMPUTE_STATUS_DISABLED"}, ["req-b"]),  # forbidden
        ({"trait": "CUSTOM_X"}, ["req-c"]),  # any-of
        ({"trait": "CUSTOM_ROOT"}, ["req-d"]),  # root_required
        ({"trait": "VCPU"}, []),  # a class is no trait
        ({"resource_class": "VCPU", "trait": "HW_CPU_X86_AVX2"}, ["req-a"]),
        ({"resource_class": "DISK_GB", "request_id": "global-1"}, []),
    ],
)
def test_class_and_trait_named_by_the_query(api, noted, params, expected):
    assert ids(api().simulate_get(PATH, params=params)) == expected


def test_an_encoded_query_is_read_as_decoded():
    query = "resources=VCPU%3A1%2CMEMORY_MB%3A64&required=%21CUSTOM_A%2CCUSTOM_B"
    assert failures.mentions(query, "MEMORY_MB", "CUSTOM_A")
    assert failures.mentions(query, trait="CUSTOM_B")
    assert not failures.mentions(query, "CUSTOM_A")


def test_pages_with_a_filter_skipping_records(api, engine):
    """Ten records, every other naming VCPU: pages of two VCPU records, each
    `next_marker` the last record of its page, the last page's null."""
    write(
        engine,
        *(
            note(f"req-{i}", None, "resources=VCPU:1" if i % 2 else "resources=VCPU_X:1", i)
            for i in range(10)
        ),
    )
    client = api()
    seen, marker = [], None
    for _ in range(5):
        params = {"resource_class": "VCPU", "limit": "2"}
        if marker:
            params["marker"] = marker
        page = client.simulate_get(PATH, params=params)
        seen.append(ids(page))
        marker = page.json["next_marker"]
        if marker is None:
            break
        assert marker == str(page.json["failures"][-1]["id"])
    assert seen[:3] == [["req-9", "req-7"], ["req-5", "req-3"], ["req-1"]]
    everything = client.simulate_get(PATH, params={"limit": "5"})
    assert len(ids(everything)) == 5 and everything.json["next_marker"] is not None


def test_admin_only(api, noted):
    client = api()
    found = client.simulate_get(PATH, headers={"x-auth-token": "alice:demo"})
    assert found.status_code == 403
    assert "tally:failures:list" in found.json["errors"][0]["detail"]


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"marker": "-1"}, "marker"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-02-30"}, "until"),  # matches the pattern, but no such day
        ({"resource_class": "vcpu"}, "resource_class"),
        ({"trait": "HW CPU"}, "trait"),
        ({"request_id": "x" * 65}, "request_id"),
        ({"consumer": "x"}, "consumer"),  # the history's, not this API's
    ],
)
def test_bad_input_names_the_parameter(api, params, named):
    found = api().simulate_get(PATH, params=params)
    assert found.status_code == 400, found.text
    (error,) = found.json["errors"]
    assert named in error["detail"] and error["title"] == "Bad Request"


def test_pruned_by_rows_then_by_days(api, engine):
    write(engine, *(note(f"req-{i}", None, "resources=VCPU:1", i) for i in range(7)))
    assert failures.prune(engine, keep_days=0, keep_rows=0) == 0  # no limits
    assert failures.prune(engine, keep_days=0, keep_rows=5, batch=1) == 1  # a batch at most
    assert failures.prune(engine, keep_days=0, keep_rows=5) == 1
    assert ids(api().simulate_get(PATH))[-1] == "req-2"
    now = START + dt.timedelta(days=30, minutes=4, seconds=30)  # req-2..4 are older
    assert failures.prune(engine, keep_days=30, keep_rows=0, now=now) == 3
    assert ids(api().simulate_get(PATH)) == ["req-6", "req-5"]


def test_the_writer_thread_prunes(engine):
    """With `history_prune_seconds = 0` the writer prunes as soon as it has written."""
    recorder = Recorder(engine, keep_days=0, keep_rows=3, prune_every=0)

    def left() -> list[str]:
        with transaction(engine) as conn:
            query = sa.select(t.failures.c.request_id).order_by(t.failures.c.id)
            return list(conn.execute(query).scalars())

    for i in range(6):
        recorder.note(note(f"req-{i}", None, "resources=VCPU:1", i))
    try:
        assert wait_until(lambda: left() == ["req-3", "req-4", "req-5"])
    finally:
        recorder.stop()


def test_the_app_hands_its_recorder_to_the_handlers(engine):
    def recorder_of(app) -> Recorder | None:
        resource, *_ = app._router.find(PATH)
        return resource.service.failures

    assert isinstance(recorder_of(create_app(Settings.of(), engine)), Recorder)
    assert recorder_of(create_app(Settings.of(failures=False), engine)) is None
    shaped = Recorder.from_settings(
        engine,
        Settings.of(failures_keep_days=3, failures_keep_rows=9, failures_queue=7),
    )
    assert shaped is not None
    assert (shaped.keep_days, shaped.keep_rows, shaped.queue_size) == (3, 9, 7)


def test_counted_in_the_metrics_by_reason(engine):
    def counted() -> float:
        value = registry().get_sample_value(
            "tally_unsatisfied_requests_total", {"reason": "traits"}
        )
        return value or 0.0

    before = counted()
    recorder = Recorder(engine)
    recorder.note(dataclass_replace(note("req-m", None, "required=CUSTOM_T"), reason="traits"))
    recorder.note(dataclass_replace(note("req-n", None, "required=CUSTOM_T"), reason=None))
    recorder.stop()
    assert counted() == before + 1
    unknown = registry().get_sample_value("tally_unsatisfied_requests_total", {"reason": "unknown"})
    assert unknown and unknown >= 1


def dataclass_replace(one: FailureNote, **changes: object) -> FailureNote:
    return dataclasses.replace(one, **changes)
