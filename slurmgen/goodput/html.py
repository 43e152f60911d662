"""The picture of `slurmgen report --html FILE`: one self-contained HTML page (inline CSS and SVG, no script,
nothing fetched), so it opens offline in any browser and can be mailed or attached to a ticket.

Hand-written SVG rather than a plotting library: the picture is rectangles, markers and hover text (SVG
<title>), which every browser shows natively; a library (plotly, bokeh) would add megabytes of JavaScript to
each file, or a CDN fetch, and a dependency to a tool that otherwise needs none. Pure: reports in, text out.

The page: the goodput figure (text and a gauge whose filled width is the goodput), one timeline row per run
whose segments are coloured by bucket (the queue between runs on the row of the run it preceded), markers above
each row for saves, preemptions, crashes, hangs, excluded nodes and requeues (staggered so none hides another;
markers at about the same moment each carry their kind as text, readable without hovering), under a run one thin
row per node its history names, carrying the markers of what happened on that node, a legend of the markers and
the node rows, the bucket table and the checkpoint advice. Colours are fixed per bucket and marker kind (COLOURS,
MARKS) and told apart with a colour-vision deficiency too (tests/goodput/test_goodput_colours.py). A sweep's page:
the roll-up (a row per point with its values, the totals), then every point's rows on one shared time scale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from slurmgen.goodput import timeline as tl
from slurmgen.goodput.advice import duration_text
from slurmgen.goodput.summary import Report, SweepReport, outcome, unknown_line
from slurmgen.goodput.text import LABELS, SWEEP_COLUMNS, UNKNOWN_CELL, sweep_rows, sweep_unknown_line

# Told apart by a person, colour-blind or not: every pair differs by at least 20 (CIELAB Delta E) in normal
# vision and in protanopia, deuteranopia and tritanopia as simulated by Machado, Oliveira and Fernandes, "A
# Physiologically-based Model for Simulation of Color Vision Deficiency" (IEEE TVCG 15(6), 2009), severity 1.
# The red (redone) and the orange (recovery) differ in lightness, which no deficiency takes away.
COLOURS = {
    tl.PRODUCTIVE: "#00bb61",
    tl.QUEUE: "#c6cdd9",
    tl.STARTUP: "#fbb500",
    tl.SAVE: "#1076af",
    tl.RESTORE: "#430099",
    tl.REDONE: "#a4001d",
    tl.RECOVERY: "#e64500",
    tl.HANG: "#24120f",
    tl.OTHER: "#535c5f",
    tl.UNKNOWN: "#919191",  # a neutral grey, apart from every bucket in each colour vision: nothing is known
}
MARKS = {  # marker kind -> colour (a downward triangle above the row); told apart as COLOURS are
    "save": "#0d47a1",
    "preemption": "#d500f9",
    "crash": "#ff1744",
    "hang": "#3e2723",
    "excluded": "#ff9100",
    "requeue": "#00b8d4",
}
GAUGE = "#1b5e20"  # the goodput gauge's filled part
NODE_BAR = "#cfd8dc"  # a node's row under its run: the run's extent, thin, with that node's markers above it
LABEL_INK = "#222222"  # the kind written beside a marker that shares its moment with others
CHAR = 5.5  # px: the mean width of one character of a marker's label (font-size 9, sans-serif)
NEAR = 12  # px: markers closer than this are stacked in lanes; of different kinds, twice as near, labelled
WIDTH, LEFT, ROW, LANE, NODE_ROW = (
    960,
    70,
    26,
    11,
    8,
)  # px: chart width, label column, bar height, marker lane, node row
STYLE = (
    """body{font:14px sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 8px}.figure{font-size:28px;font-weight:bold}
.gauge{width:400px;height:14px;background:#e0e0e0;margin:6px 0 12px}.gauge div{height:14px;background:"""
    + GAUGE
    + """}
table{border-collapse:collapse;margin:12px 0}td,th{padding:2px 10px;text-align:right}td:first-child{text-align:left}
.points td:nth-child(2),.points td:nth-child(3),.points th:nth-child(-n+3){text-align:left}
.key{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
ul{margin:4px 0}"""
)


@dataclass(frozen=True)
class Placed:
    marker: tl.Marker
    x: float
    lane: int
    label: str  # written beside the marker when others stand at about the same moment; "" otherwise
    left: bool  # the label to the marker's left (it would run past the chart's right edge)


def _marker_lanes(marks: list[tl.Marker], x: Callable[[float], float]) -> tuple[list[Placed], int]:
    """Each marker's x and lane (staggered so that none hides another), and the number of lanes (at least one).
    Markers of different kinds at about the same moment (closer than 2 NEAR px) each get their kind written beside
    them, so a stack reads without hovering; a lane takes a marker only where its triangle and label fit."""
    xs = [x(m.time) for m in marks]
    # A train of one kind (periodic saves every few pixels) reads by its colour; a label is for a marker that a
    # marker of another kind stands beside (a preemption, its save, the requeue), within a label's reach.
    stacked = [any(abs(a - xs[j]) < 2 * NEAR and marks[j].kind != marks[k].kind for j in range(len(xs)) if j != k)
               for k, a in enumerate(xs)]  # fmt: skip
    ends: list[float] = []  # the right end of what each lane holds so far
    placed = []
    for m, mx, labelled in zip(marks, xs, stacked, strict=True):
        label = m.kind if labelled else ""
        width = CHAR * len(label) + 3 if label else 0.0
        left = bool(label) and mx + 7 + width > WIDTH
        lo, hi = (mx - 7 - width, mx + 5) if left else (mx - 5, mx + 7 + width if label else mx + 5)
        lane = next((k for k, end in enumerate(ends) if lo - end >= 2), len(ends))
        if lane < len(ends):
            ends[lane] = hi
        else:
            ends.append(hi)
        placed.append(Placed(m, mx, lane, label, left))
    return placed, max(len(ends), 1)


def _marker_svg(placed: list[Placed], y: float) -> list[str]:
    parts = []
    for p in placed:
        m, mx, my = p.marker, p.x, y + LANE * p.lane
        parts.append(
            f'<polygon class="marker m-{m.kind}" points="{mx - 5:.1f},{my:.1f} {mx + 5:.1f},{my:.1f} '
            f'{mx:.1f},{my + 9:.1f}" fill="{MARKS.get(m.kind, "#000")}"><title>{escape(m.text)}</title></polygon>'
        )
        if p.label:
            tx, anchor = (mx - 7, "end") if p.left else (mx + 7, "start")
            parts.append(f'<text class="marker-label" x="{tx:.1f}" y="{my + 8:.1f}" font-size="9" '
                         f'text-anchor="{anchor}" fill="{LABEL_INK}">{escape(p.label)}</text>')  # fmt: skip
    return parts


def extent(r: Report) -> tuple[float, float] | None:
    """The moments a report's picture spans: its first segment's or run's start to its last run's end."""
    line = r.timeline
    if not line.runs:
        return None
    return min([line.runs[0].start, *(s.start for s in line.segments)]), line.runs[-1].end


def _rows(r: Report, window: tuple[float, float] | None = None) -> str:
    """The report's rows, on the time scale of `window` (a sweep's points share one), else of its own extent."""
    line = r.timeline
    own = extent(r)
    if own is None:
        return "<p>no run has started yet</p>"
    origin, last = own if window is None else window
    span = max(last - origin, 1e-9)
    scale = (WIDTH - LEFT - 10) / span

    def x(t: float) -> float:
        return LEFT + (t - origin) * scale

    parts: list[str] = []
    y = 10
    marks_of: dict[int, list[tl.Marker]] = {}
    segments_of: dict[int, list[tl.Segment]] = {}
    for m in line.markers:
        marks_of.setdefault(m.run, []).append(m)
    for seg in line.segments:
        segments_of.setdefault(seg.run, []).append(seg)
    for run in line.runs:
        marks = marks_of.get(run.run, [])
        placed, lanes = _marker_lanes([m for m in marks if m.node is None], x)
        parts += _marker_svg(placed, y)
        top = y + LANE * lanes
        parts.append(f'<text x="4" y="{top + ROW - 8}" class="label">run {run.run}</text>')
        for s in segments_of.get(run.run, []):
            w = max(s.seconds * scale, 0.0)
            tip = f"{LABELS.get(s.bucket, s.bucket)}: {s.seconds:.1f} s (run {run.run})"
            parts.append(
                f'<rect class="seg b-{s.bucket}" x="{x(s.start):.2f}" y="{top}" width="{w:.2f}" height="{ROW}" '
                f'fill="{COLOURS[s.bucket]}"><title>{escape(tip)}</title></rect>'
            )
        y = top + ROW + 4
        # One row per node the run's history names (a crash's or a hang's node, an excluded node), under the
        # run, with that node's markers: which node failed shows at a glance.
        for node in dict.fromkeys(m.node for m in marks if m.node is not None):
            placed, lanes = _marker_lanes([m for m in marks if m.node == node], x)
            parts += _marker_svg(placed, y)
            bar = y + LANE * lanes
            parts.append(f'<text x="14" y="{bar + NODE_ROW - 1}" font-size="11" class="node-label">'
                         f"{escape(node)}</text>")  # fmt: skip
            parts.append(
                f'<rect class="node-row" x="{x(run.start):.2f}" y="{bar}" width="{(run.end - run.start) * scale:.2f}" '
                f'height="{NODE_ROW}" fill="{NODE_BAR}"><title>{escape(f"node {node} (run {run.run})")}</title></rect>'
            )
            y = bar + NODE_ROW + 4
        y += 8
    for k in range(6):
        t = span * k / 5
        anchor = "start" if k == 0 else "end" if k == 5 else "middle"
        parts.append(f'<text x="{x(origin + t):.1f}" y="{y + 12}" text-anchor="{anchor}" font-size="11">'
                     f"{escape(duration_text(t))}</text>")  # fmt: skip
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y + 20}">{"".join(parts)}</svg>'


def _table(wall: float, productive: float | None, buckets: dict[str, float]) -> str:
    rows = "".join(
        f'<tr><td><span class="key" style="background:{COLOURS[k]}"></span>{escape(LABELS[k])}</td>'
        f"<td>{v:.1f}</td><td>{(v / wall if wall else 0):.1%}</td></tr>"
        for k, v in [*([] if productive is None else [(tl.PRODUCTIVE, productive)]), *buckets.items()]
    )
    return f"<table><tr><th></th><th>seconds</th><th>%</th></tr>{rows}</table>"


def _legend() -> str:
    marks = "".join(f'<span class="key" style="background:{c}"></span>{escape(k)}' for k, c in MARKS.items())
    node = (f'<span class="key" style="background:{NODE_BAR};height:{NODE_ROW}px"></span>a node its history '
            "names (a crash's, a hang's, an excluded node), under the run, with that node's markers")  # fmt: skip
    return f'<p>markers: {marks}</p><p class="legend-nodes">node rows: {node}</p>'


def _job(r: Report) -> str:
    said = r.advice.lines() if r.advice is not None else [r.advice_note] if r.advice_note is not None else []
    advice = "" if not said else "<h2>Checkpoint interval</h2><ul>" + "".join(
        f"<li>{escape(line)}</li>" for line in said) + "</ul>"  # fmt: skip
    state = "running" if r.running else "ended"
    if not r.progress_known:
        return (
            f"<h1>job {escape(r.job)}: {len(r.timeline.runs)} run(s), {state}</h1>"
            f'<div id="progress-unknown">{escape(unknown_line(r))}</div>'
            f"{_rows(r)}{_legend()}{_table(r.wall_seconds, None, dict(r.buckets))}"
        )
    return (
        f"<h1>job {escape(r.job)}: {len(r.timeline.runs)} run(s), {state}</h1>"
        f'<div>goodput <span class="figure" id="goodput">{r.goodput:.1%}</span> of '
        f"{duration_text(r.wall_seconds)} from the first start; {r.goodput_with_queue:.1%} with the "
        f"{duration_text(r.queue_seconds)} queue wait before it</div>"
        f'<div class="gauge" title="goodput {r.goodput:.1%}"><div style="width:{r.goodput * 400:.1f}px"></div></div>'
        f"{_rows(r)}{_legend()}{_table(r.wall_seconds, r.productive_seconds, dict(r.buckets))}{advice}"
    )


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")  # fmt: skip


def job_page(reports: Sequence[Report]) -> str:
    """One job (an array job: one section per task)."""
    title = "slurmgen report " + ", ".join(r.job for r in reports)
    return _page(title, "<hr>".join(_job(r) for r in reports))


def _points_table(s: SweepReport) -> str:
    """A row per point (its values, how it stands, its runs, requeues, restarts, wall and goodput), the totals last."""
    head = "".join(f"<th>{escape(c)}</th>" for c in SWEEP_COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in sweep_rows(s))
    return f'<table class="points"><tr>{head}</tr>{body}</table>'


def sweep_page(s: SweepReport) -> str:
    """A sweep: the roll-up (goodput, a row per point, the summed buckets), then each point's rows, every point on
    one time scale (the first start of any point to the last end), so when each ran and for how long compare at a
    glance."""
    spans = [e for _, r in s.points if (e := extent(r)) is not None]
    window = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None
    if s.progress_known:
        figure = (f'<div>goodput <span class="figure" id="goodput">{s.goodput:.1%}</span> of '
                  f"{duration_text(s.wall_seconds)} summed over the points; {s.goodput_with_queue:.1%} with the "
                  f"{duration_text(s.queue_seconds)} they waited before their first starts</div>"
                  f'<div class="gauge" title="goodput {s.goodput:.1%}">'
                  f'<div style="width:{s.goodput * 400:.1f}px"></div></div>')  # fmt: skip
    else:
        figure = f'<div id="progress-unknown">{escape(sweep_unknown_line(s))}</div>'
    productive = s.productive_seconds if s.progress_known else None
    head = (f"<h1>sweep {escape(s.sweep)}: {len(s.points)} point(s)</h1>{figure}{_points_table(s)}"
            f"{_table(s.wall_seconds, productive, s.buckets())}")  # fmt: skip
    sections = []
    for p, r in s.points:
        values = s.shown.get(p, "")
        made = f"goodput {r.goodput:.1%}" if r.progress_known else f"goodput {UNKNOWN_CELL}"
        title = f"point {p}" + (f" ({values})" if values else "") + f": {outcome(r)}, {made}"
        sections.append(f'<h2 class="point">{escape(title)}</h2>{_rows(r, window)}')
    return _page(f"slurmgen report {s.sweep}", head + "<hr>" + "".join(sections) + _legend())
