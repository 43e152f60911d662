"""The picture of `slurmgen report --html FILE`: one self-contained HTML page (inline CSS and SVG, no script,
nothing fetched), so it opens offline in any browser and can be mailed or attached to a ticket.

Hand-written SVG rather than a plotting library: the picture is rectangles, markers and hover text (SVG
<title>), which every browser shows natively; a library (plotly, bokeh) would add megabytes of JavaScript to
each file, or a CDN fetch, and a dependency to a tool that otherwise needs none. Pure: reports in, text out.

The page: the goodput figure (text and a gauge whose filled width is the goodput), one timeline row per run
whose segments are coloured by bucket (the queue between runs on the row of the run it preceded), markers above
each row for saves, preemptions, crashes, hangs, excluded nodes and requeues (staggered so none hides another),
under a run one thin row per node its history names, carrying the markers of what happened on that node,
the bucket table and the checkpoint advice. Colours are fixed per bucket and marker kind (COLOURS, MARKS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from slurmgen.goodput import timeline as tl
from slurmgen.goodput.advice import duration_text
from slurmgen.goodput.summary import Report, SweepReport, unknown_line
from slurmgen.goodput.text import LABELS

COLOURS = {
    tl.PRODUCTIVE: "#2e7d32",
    tl.QUEUE: "#b0bec5",
    tl.STARTUP: "#f9a825",
    tl.SAVE: "#1565c0",
    tl.RESTORE: "#6a1b9a",
    tl.REDONE: "#c62828",
    tl.RECOVERY: "#ef6c00",
    tl.HANG: "#4e342e",
    tl.OTHER: "#78909c",
    tl.UNKNOWN: "#e0e0e0",  # no colour of a bucket: nothing is known of that time
}
MARKS = {  # marker kind -> colour (a downward triangle above the row)
    "save": "#0d47a1",
    "preemption": "#d500f9",
    "crash": "#ff1744",
    "hang": "#3e2723",
    "excluded": "#ff9100",
    "requeue": "#00b8d4",
}
GAUGE = "#1b5e20"  # the goodput gauge's filled part
NODE_BAR = "#cfd8dc"  # a node's row under its run: the run's extent, thin, with that node's markers above it
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
.key{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
ul{margin:4px 0}"""
)


def _marker_lanes(
    marks: list[tl.Marker], x: Callable[[float], float]
) -> tuple[list[tuple[tl.Marker, float, int]], int]:
    """Each marker's x and lane (staggered so that none hides another), and the number of lanes (at least one)."""
    lanes: list[float] = []  # the last x of each lane
    placed = []
    for m in marks:
        mx = x(m.time)
        lane = next((k for k, last in enumerate(lanes) if mx - last >= 12), len(lanes))
        if lane < len(lanes):
            lanes[lane] = mx
        else:
            lanes.append(mx)
        placed.append((m, mx, lane))
    return placed, max(len(lanes), 1)


def _marker_svg(placed: list[tuple[tl.Marker, float, int]], y: float) -> list[str]:
    parts = []
    for m, mx, lane in placed:
        my = y + LANE * lane
        parts.append(
            f'<polygon class="marker m-{m.kind}" points="{mx - 5:.1f},{my:.1f} {mx + 5:.1f},{my:.1f} '
            f'{mx:.1f},{my + 9:.1f}" fill="{MARKS.get(m.kind, "#000")}"><title>{escape(m.text)}</title></polygon>'
        )
    return parts


def _rows(r: Report) -> str:
    line = r.timeline
    if not line.runs:
        return "<p>no run has started yet</p>"
    origin = min([line.runs[0].start, *(s.start for s in line.segments)])
    span = max(line.runs[-1].end - origin, 1e-9)
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
    return f"<p>markers: {marks}</p>"


def _job(r: Report) -> str:
    advice = "" if r.advice is None else "<h2>Checkpoint interval</h2><ul>" + "".join(
        f"<li>{escape(line)}</li>" for line in r.advice.lines()) + "</ul>"  # fmt: skip
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


def sweep_page(s: SweepReport) -> str:
    """A sweep: the roll-up, then each point's section."""
    wall, productive = s.wall_seconds, s.productive_seconds
    share = productive / wall if wall else 0.0
    head = (f"<h1>sweep {escape(s.sweep)}: {len(s.points)} point(s)</h1>"
            f'<div>goodput <span class="figure" id="goodput">{share:.1%}</span></div>'
            f"{_table(wall, productive, s.buckets())}")  # fmt: skip
    return _page(f"slurmgen report {s.sweep}", head + "".join(f"<hr><h2>point {p}</h2>{_job(r)}" for p, r in s.points))
