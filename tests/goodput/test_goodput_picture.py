"""What the HTML report draws, read from its SVG text (the browser test, test_goodput_html.py, looks at the pixels):
markers at about the same moment are stacked and each carries its kind as text, a lone one does not; the node rows
have a legend; a sweep's points share one time scale and its page has a row per point with the point's values."""

from __future__ import annotations

import re
from typing import Any

from goodput.test_goodput import T0, crash_hang_preempt, ev, two_points
from slurmgen import run_history as rh
from slurmgen.goodput import html, summary


def labels(page: str) -> list[tuple[str, float, float]]:
    """(text, x, y) of every marker label."""
    found = re.findall(r'<text class="marker-label" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', page)
    return [(t, float(x), float(y)) for x, y, t in found]


def test_stacked_markers_are_labelled_and_a_lone_one_is_not() -> None:
    """crash_hang_preempt: the preemption (900 s), its save (915 s) and the requeue (930 s) stand within a few
    pixels of each other on a 2000 s chart; the periodic saves at 200 s and 800 s, the crash and the hang alone."""
    page = html.job_page([summary.report("42", crash_hang_preempt(), now=T0 + 5000)])
    got = labels(page)
    assert [t for t, _, _ in got] == ["preemption", "save", "requeue"], got
    assert len({y for _, _, y in got}) == 3  # one lane each: none is written over another
    assert page.count('class="marker m-') == 7  # every marker is drawn, labelled or not


def test_a_train_of_saves_is_staggered_without_labels() -> None:
    """Periodic saves a few pixels apart read by their colour: lanes, no text."""
    events = [ev(rh.RUN_START, 1, 0, "batch-shell"), ev(rh.FIRST_STEP, 1, 10)]
    events += [ev(rh.SAVE, 1, 100 + 5 * k, seconds=0.5, cause="periodic") for k in range(6)]
    events.append(ev(rh.RUN_END, 1, 1000, "batch-shell", exit_code=0, ended="completed"))
    page = html.job_page([summary.report("42", events, now=T0 + 1000)])
    assert page.count('class="marker m-save"') == 6 and labels(page) == []
    lanes = {float(y) for y in re.findall(r'class="marker m-save" points="[\d.]+,([\d.]+) ', page)}
    assert len(lanes) == 3  # 4.4 px apart: a lane is free again 12 px on, as before labels


def test_a_label_near_the_right_edge_is_written_to_the_left_of_its_marker() -> None:
    events = [  # preempted in the last seconds of the chart: a stack of three at its right edge
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 10),
        ev(rh.PREEMPTED, 1, 995, "batch-shell"),
        ev(rh.STOP, 1, 996, cause=rh.PREEMPTION),
        ev(rh.SAVE, 1, 998, seconds=1.0, cause=rh.PREEMPTION),
        ev(rh.REQUEUE, 1, 999, "rank0", cause=rh.PREEMPTION),
        ev(rh.RUN_END, 1, 1000, "batch-shell", exit_code=0, ended="requeued"),
    ]
    page = html.job_page([summary.report("42", events, now=T0 + 1000)])
    anchors = re.findall(r'<text class="marker-label" x="([\d.]+)"[^>]*text-anchor="(\w+)"', page)
    assert len(anchors) == 3 and all(a == "end" for _, a in anchors), anchors
    assert all(float(x) <= html.WIDTH for x, _ in anchors)


def test_the_node_rows_have_a_legend() -> None:
    page = html.job_page([summary.report("42", crash_hang_preempt(), now=T0 + 5000)])
    legend = re.search(r'<p class="legend-nodes">(.*?)</p>', page)
    assert legend is not None and html.NODE_BAR in legend.group(1) and "node" in legend.group(1)


def shifted(events: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    out = []
    for e in events:
        moved = {**e, "time": e["time"] + seconds}
        if isinstance(e.get("progressed"), float):
            moved["progressed"] = e["progressed"] + seconds
        out.append(moved)
    return out


def first_segment_x(section: str) -> float:
    found = re.search(r'<rect class="seg b-\w+" x="([\d.]+)"', section)
    assert found is not None, section[:300]
    return float(found.group(1))


def test_a_sweeps_points_share_one_time_scale() -> None:
    """Point 1 starts 1000 s after point 0 and both last 2000 s: on one scale of 3000 s, point 1's first segment
    starts a third of the way along, and both sections carry the same axis."""
    one = summary.report("1_0", crash_hang_preempt(), now=T0 + 9000)
    two = summary.report("1_1", shifted(crash_hang_preempt(), 1000), now=T0 + 9000)
    page = html.sweep_page(summary.SweepReport("1", [(0, one), (1, two)], {}, {0: "lr=0.1", 1: "lr=0.2"}))
    sections = page.split('<h2 class="point">')[1:]
    assert [s.split("<")[0] for s in sections] == [
        f"point 0 (lr=0.1): completed, goodput {one.goodput:.1%}",
        f"point 1 (lr=0.2): completed, goodput {two.goodput:.1%}",
    ]
    scale = (html.WIDTH - html.LEFT - 10) / 3000
    assert first_segment_x(sections[0]) == html.LEFT
    assert abs(first_segment_x(sections[1]) - (html.LEFT + 1000 * scale)) < 0.01
    axes = [re.findall(r'font-size="11">([^<]*)</text>', s.split("</svg>")[0])[-6:] for s in sections]
    assert axes[0] == axes[1] and axes[0][-1] == "50.0 min", axes


def test_a_sweeps_page_has_a_row_per_point_with_its_values_and_the_totals() -> None:
    page = html.sweep_page(two_points())
    table = re.search(r'<table class="points">(.*?)</table>', page)
    assert table is not None
    rows = [re.findall(r"<td>([^<]*)</td>", row) for row in table.group(1).split("</tr>") if "<td>" in row]
    assert [r[:3] for r in rows] == [["0", "lr=0.1", "completed"], ["1", "lr=0.2", "running"],
                                     ["total", "", "1 completed, 1 running"]]  # fmt: skip
