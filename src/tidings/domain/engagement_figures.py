"""Opens or clicks counted (ENG-5): people's unique and all hits, machines' apart."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Figures:
    """Hits of one kind: people (each message once, and every time) and machines apart."""

    human_unique: int = 0
    human_total: int = 0
    machine_total: int = 0

    def plus(self, other: Figures) -> Figures:
        return Figures(
            self.human_unique + other.human_unique,
            self.human_total + other.human_total,
            self.machine_total + other.machine_total,
        )
