"""Small hand-written SVG charts for the report: lines, steps and points over time.

No third-party JavaScript or CSS: each chart is an inline `<svg>` string whose
every text (titles, legends, labels from the wire) is escaped. Large series are
thinned per pixel column (lowest and highest point kept), so a 100 MB capture's
latencies still make a chart of a few thousand points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")
WIDTH, HEIGHT = 900, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 28, 36
MAX_POINTS = 2400  # per series, after thinning


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]
    style: str = "line"  # line, step, points


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical line at `x` with a short label (a leader change, an epoch bump)."""

    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    y_label: str
    series: Sequence[Series]
    markers: Sequence[Marker] = field(default_factory=tuple)
    log_y: bool = False
    threshold: float | None = None  # a dashed horizontal line
    x_range: tuple[float, float] | None = None  # the whole capture, so charts line up
    x_label: str = "seconds since the first message"


def render(chart: Chart) -> str:
    xs = [x for s in chart.series for x, _ in s.points] + [m.x for m in chart.markers]
    xs += list(chart.x_range or ())
    ys = [y for s in chart.series for _, y in s.points]
    if chart.threshold is not None:
        ys.append(chart.threshold)
    if not xs or not ys:
        return ""
    scale = _Scale(min(xs), max(xs), min(ys), max(ys), chart.log_y)
    parts = [f'<svg class="kd-chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
             f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
             f"<title>{escape(chart.title)}</title>",
             f'<text x="{LEFT}" y="16" class="kd-chart-title">{escape(chart.title)}</text>']
    parts += _axes(scale, chart)
    parts += _markers(scale, chart.markers)
    for index, series in enumerate(chart.series):
        parts += _series(scale, series, PALETTE[index % len(PALETTE)], index)
    parts.append("</svg>")
    return "".join(parts)


class _Scale:
    def __init__(self, x0: float, x1: float, y0: float, y1: float, log_y: bool) -> None:
        self.log_y = log_y and y0 > 0
        if self.log_y:
            y0, y1 = math.log10(y0), math.log10(y1)
        else:
            y0 = min(y0, 0.0)
        self.x0, self.x1 = x0, x1 if x1 > x0 else x0 + 1.0
        self.y0, self.y1 = y0, y1 if y1 > y0 else y0 + 1.0
        self.y1 += (self.y1 - self.y0) * 0.05

    def x(self, value: float) -> float:
        return LEFT + (value - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        if self.log_y:
            value = math.log10(max(value, 10**self.y0))
        return HEIGHT - BOTTOM - (value - self.y0) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = high - low
    step = 10 ** math.floor(math.log10(span / count)) if span > 0 else 1.0
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= count:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _axes(scale: _Scale, chart: Chart) -> list[str]:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    parts = [f'<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" class="kd-axis"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" class="kd-axis"/>',
             f'<text x="{(LEFT + right) / 2:.0f}" y="{HEIGHT - 4}" class="kd-axis-label" '
             f'text-anchor="middle">{escape(chart.x_label)}</text>',
             f'<text x="12" y="{(TOP + bottom) / 2:.0f}" class="kd-axis-label" text-anchor="middle" '
             f'transform="rotate(-90 12 {(TOP + bottom) / 2:.0f})">{escape(chart.y_label)}</text>']
    for tick in _ticks(scale.x0, scale.x1):
        x = scale.x(tick)
        parts.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{_number(tick)}</text>')
    y_ticks = ([10.0**e for e in range(math.floor(scale.y0), math.ceil(scale.y1) + 1)]
               if scale.log_y else _ticks(scale.y0, scale.y1))
    for tick in y_ticks:
        y = scale.y(tick)
        if TOP - 1 <= y <= bottom + 1:
            parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="kd-grid"/>'
                         f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{_number(tick)}</text>')
    if chart.threshold is not None:
        y = scale.y(chart.threshold)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="kd-threshold"/>')
    return parts


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 10000 or abs(value) < 0.01:
        return f"{value:.3g}"
    return f"{value:.6g}"


def _markers(scale: _Scale, markers: Sequence[Marker]) -> list[str]:
    parts = []
    for index, marker in enumerate(markers):
        x = scale.x(marker.x)
        label_y = TOP + 10 + 11 * (index % 3)
        parts.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" '
                     f'class="kd-marker"/><text x="{x + 3:.1f}" y="{label_y}" class="kd-marker-label">'
                     f"{escape(marker.label)}</text>")
    return parts


def _series(scale: _Scale, series: Series, colour: str, index: int) -> list[str]:
    points = thin(series.points, WIDTH - LEFT - RIGHT)
    coordinates = [(scale.x(x), scale.y(y)) for x, y in points]
    legend_y = TOP + 6 + 14 * index
    legend = (f'<rect x="{WIDTH - RIGHT + 10}" y="{legend_y - 8}" width="10" height="10" '
              f'fill="{colour}"/><text x="{WIDTH - RIGHT + 24}" y="{legend_y + 1}">'
              f"{escape(series.label[:28])}</text>")
    if series.style == "points":
        dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.2"/>' for x, y in coordinates)
        return [f'<g fill="{colour}" class="kd-series">{dots}</g>', legend]
    if series.style == "step":
        stepped = []
        for (x, y), (next_x, _) in zip(coordinates, [*coordinates[1:], coordinates[-1]], strict=True):
            stepped += [(x, y), (next_x, y)]
        coordinates = stepped
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coordinates)
    return [f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{path}" '
            f'class="kd-series"/>', legend]


def thin(points: Sequence[tuple[float, float]], columns: int) -> Sequence[tuple[float, float]]:
    """At most about 2 points per pixel column (the lowest and the highest), in x order."""
    if len(points) <= MAX_POINTS:
        return points
    low_x = min(x for x, _ in points)
    span = (max(x for x, _ in points) - low_x) or 1.0
    kept: dict[int, list[tuple[float, float]]] = {}
    for point in points:
        column = int((point[0] - low_x) / span * (columns - 1))
        extremes = kept.get(column)
        if extremes is None:
            kept[column] = [point, point]
        elif point[1] < extremes[0][1]:
            extremes[0] = point
        elif point[1] > extremes[1][1]:
            extremes[1] = point
    return sorted({p for pair in kept.values() for p in pair})
