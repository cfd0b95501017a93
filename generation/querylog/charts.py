"""Server-side SVG chart geometry for the dashboard (no JavaScript, no chart library)."""

from __future__ import annotations

from dataclasses import dataclass

from generation.querylog.selectors import DayCount

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 760, 220, 36, 24, 10


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    y_total: float
    h_total: float
    y_refused: float
    h_refused: float
    label: str
    title: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    ticks: list[tuple[float, int]]  # (y, value) for the gridlines
    labels: list[tuple[float, str]]  # (x, day) under some bars
    baseline: float
    left: int


def daily_bars(days: list[DayCount]) -> Chart:
    """Bars per day (all queries) with the refused part drawn over them."""
    top = max([d.total for d in days] + [1])
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    step = (WIDTH - PAD_LEFT) / max(len(days), 1)
    bars, labels = [], []
    every = max(1, len(days) // 8)
    for i, day in enumerate(days):
        h_total = plot_h * day.total / top
        h_refused = plot_h * day.refused / top
        x = PAD_LEFT + i * step
        bars.append(
            Bar(
                x=round(x + step * 0.15, 1),
                width=round(step * 0.7, 1),
                y_total=round(PAD_TOP + plot_h - h_total, 1),
                h_total=round(h_total, 1),
                y_refused=round(PAD_TOP + plot_h - h_refused, 1),
                h_refused=round(h_refused, 1),
                label=day.day.strftime("%m-%d"),
                title=f"{day.day.isoformat()}: {day.total} queries, {day.refused} without evidence",
            )
        )
        if i % every == 0:
            labels.append((round(x + step / 2, 1), day.day.strftime("%m-%d")))
    ticks = [(round(PAD_TOP + plot_h - plot_h * v / top, 1), v) for v in sorted({0, top // 2, top})]
    return Chart(WIDTH, HEIGHT, bars, ticks, labels, PAD_TOP + plot_h, PAD_LEFT)
