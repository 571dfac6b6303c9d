"""Handlers of providers (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class Providers:
    POLICY = "placement:providers"

    def __init__(self, service: Service) -> None:
        self.service = service


class Provider:
    POLICY = "placement:providers"

    def __init__(self, service: Service) -> None:
        self.service = service
