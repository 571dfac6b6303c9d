"""Handlers of inventories (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class Inventories:
    POLICY = "placement:inventories"

    def __init__(self, service: Service) -> None:
        self.service = service


class Inventory:
    POLICY = "placement:inventories"

    def __init__(self, service: Service) -> None:
        self.service = service
