"""Handlers of usages (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class ProviderUsages:
    POLICY = "placement:usages"

    def __init__(self, service: Service) -> None:
        self.service = service


class Usages:
    POLICY = "placement:usages"

    def __init__(self, service: Service) -> None:
        self.service = service
