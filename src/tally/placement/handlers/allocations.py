"""Handlers of allocations (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class Allocations:
    POLICY = "placement:allocations"

    def __init__(self, service: Service) -> None:
        self.service = service


class ConsumerAllocations:
    POLICY = "placement:allocations"

    def __init__(self, service: Service) -> None:
        self.service = service


class ProviderAllocations:
    POLICY = "placement:allocations"

    def __init__(self, service: Service) -> None:
        self.service = service
