"""Handlers of allocation candidates (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class AllocationCandidates:
    POLICY = "placement:allocation_candidates"

    def __init__(self, service: Service) -> None:
        self.service = service
