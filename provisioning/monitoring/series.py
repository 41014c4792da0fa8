"""What a chart draws: typed series out of a metrics source (Prometheus or simulated)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Series:
    """One GPU's values over time: ``points`` are (unix seconds, value), oldest first."""

    node: str
    gpu: str
    points: tuple[tuple[float, float], ...]

    @property
    def label(self) -> str:
        return f"GPU {self.gpu}"


@dataclass(frozen=True)
class Chart:
    """One metric of one order over one range, every GPU of every node as a series."""

    metric: str
    label: str
    unit: str
    range: str
    range_label: str
    start: datetime
    end: datetime
    step_s: int
    max_value: float | None
    series: tuple[Series, ...] = ()
    simulated: bool = False
    error: str = ""  # the source could not answer; the page says so instead of a blank chart
    nodes: tuple[str, ...] = field(default=())

    def for_node(self, node: str) -> tuple[Series, ...]:
        return tuple(s for s in self.series if s.node == node)

    def mean(self) -> float | None:
        values = [v for s in self.series for _, v in s.points]
        return sum(values) / len(values) if values else None
