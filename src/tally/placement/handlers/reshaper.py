"""Handler of POST /reshaper (to be written)."""

from __future__ import annotations

from tally.placement.context import Service


class Reshaper:
    POLICY = "placement:reshaper"

    def __init__(self, service: Service) -> None:
        self.service = service
