"""Handlers of traits (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class Traits:
    POLICY = "placement:traits"

    def __init__(self, service: Service) -> None:
        self.service = service


class Trait:
    POLICY = "placement:traits"

    def __init__(self, service: Service) -> None:
        self.service = service


class ProviderTraits:
    POLICY = "placement:traits"

    def __init__(self, service: Service) -> None:
        self.service = service
