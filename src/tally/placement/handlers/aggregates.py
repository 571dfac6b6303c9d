"""Handlers of aggregates (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class ProviderAggregates:
    POLICY = "placement:aggregates"

    def __init__(self, service: Service) -> None:
        self.service = service
