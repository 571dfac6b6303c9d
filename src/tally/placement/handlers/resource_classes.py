"""Handlers of resource classes (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class ResourceClasses:
    POLICY = "placement:resource_classes"

    def __init__(self, service: Service) -> None:
        self.service = service


class ResourceClass:
    POLICY = "placement:resource_classes"

    def __init__(self, service: Service) -> None:
        self.service = service
