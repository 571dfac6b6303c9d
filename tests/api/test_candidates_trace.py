"""One GET /allocation_candidates enters the search module (candidates/search.py)
once: the pipeline asks it one question per request, whichever source answers
(the index, kept answers or not, or the database), never a second pass that
reads the request's names again. Traced with `sys.setprofile`."""

from __future__ import annotations

import sys
import uuid as uuidlib
from types import FrameType

import pytest

from tally.placement.ledger.candidates import search

QUERIES = (
    "resources=VCPU:1",
    "resources=VCPU:1&limit=1",
    "resources=VCPU:1,MEMORY_MB:64",
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=none",
    "resources=VCPU:1&required=HW_CPU_X86_AVX",
)


def _entries(client, query: str) -> list[str]:  # noqa: ANN001
    """The calls into search.py from outside it while answering `query` (not
    counting the callbacks search.py hands out itself: its nested functions)."""
    here = search.__file__
    found: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event != "call" or code.co_filename != here or "<locals>" in code.co_qualname:
            return
        caller = frame.f_back
        if caller is None or caller.f_code.co_filename != here:
            found.append(code.co_qualname)

    sys.setprofile(profile)
    try:
        resp = client.simulate_get(f"/allocation_candidates?{query}")
    finally:
        sys.setprofile(None)
    assert resp.status_code == 200, resp.text
    return found


@pytest.mark.parametrize("index_mb", [64, 0], ids=["index", "database"])
def test_one_request_enters_the_search_once(api, index_mb):
    """(Failed searches not kept: an empty answer's verdict searches again, apart.)"""
    client = api("1.39", candidates_index_max_mb=index_mb, failures=False)
    for _ in range(3):
        rp = str(uuidlib.uuid4())
        assert (
            client.simulate_post("/resource_providers", json={"name": rp, "uuid": rp}).status_code
            == 200
        )
        inventory = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 1024}}
        body = {"resource_provider_generation": 0, "inventories": inventory}
        assert (
            client.simulate_put(f"/resource_providers/{rp}/inventories", json=body).status_code
            == 200
        )
    for query in QUERIES:
        cold = api("1.39", candidates_index_max_mb=index_mb, failures=False)  # its own index
        assert len(_entries(cold, query)) == 1, query
        # asked again: a kept answer (none entered) or the search again (once)
        assert len(_entries(cold, query)) <= 1, query
