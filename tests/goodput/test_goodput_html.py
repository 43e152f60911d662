"""The HTML report in a real headless browser (Debian's `chromium`): a screenshot of the page shows one timeline
row per run, one marker per event (counted by colour in the pixels), and the goodput gauge filled to the goodput;
under each run one thin row per node its history names, with that node's markers on it; the page's text shows
the goodput figure. The page loads nothing: it is written to a directory and opened as a
file, with the network off."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from apt_install import apt_install

from goodput.png_pixels import Pixel, read_png
from goodput.test_goodput import T0, crash_hang_preempt, ev
from slurmgen import run_history as rh
from slurmgen.goodput import html, summary

pytestmark = pytest.mark.slow


def browser() -> str:
    """Debian's chromium; installed with apt-get as root when missing, as the cluster harness installs Slurm
    (tests/cluster/up.sh). Elsewhere the test is skipped with the reason, and fails under CI."""
    found, failed = shutil.which("chromium"), ""
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        failed = apt_install("chromium")
        found = shutil.which("chromium")
    if found is None:
        reason = "Debian's chromium is missing and could not be installed (as root: apt-get install chromium)"
        reason += f": {failed}" if failed else ""
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={cwd / 'profile'}", "--proxy-server=127.0.0.1:9", *args]  # fmt: skip
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def rgb(colour: str) -> Pixel:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def components(pixels: set[tuple[int, int]]) -> int:
    """Connected groups (8-neighbours) of the given pixel positions."""
    seen: set[tuple[int, int]] = set()
    count = 0
    for start in pixels:
        if start in seen:
            continue
        count += 1
        todo = [start]
        seen.add(start)
        while todo:
            x, y = todo.pop()
            for dx in (-1, 0, 1):
                for dy in (-1, 0, 1):
                    n = (x + dx, y + dy)
                    if n in pixels and n not in seen:
                        seen.add(n)
                        todo.append(n)
    return count


def with_nodes() -> list[dict[str, Any]]:
    """crash_hang_preempt with the nodes its history names: the crash on n2, the hang on n1 (run 1), and n3
    excluded at the start of run 2."""
    events = []
    for e in crash_hang_preempt():
        if e["event"] == rh.RESTART:
            e = {**e, "node": "n2" if e["cause"] == "crash" else "n1"}
        events.append(e)
        if e["event"] == rh.RUN_START and e["run"] == 2:
            events.append(ev(rh.NODE_EXCLUDED, 2, 1105, "batch-shell", node="n3", reason="health check failed"))
    return events


def test_the_picture_shows_a_row_per_run_a_marker_per_event_and_the_goodput(tmp_path: Path) -> None:
    report = summary.report("42", with_nodes(), now=T0 + 5000)
    page = tmp_path / "report.html"
    page.write_text(html.job_page([report]), encoding="utf-8")
    shot = tmp_path / "shot.png"
    done = chromium("--window-size=1000,900", f"--screenshot={shot}", page.as_uri(), cwd=tmp_path)
    assert shot.exists(), done.stderr
    image = read_png(shot)

    buckets = {rgb(c) for c in html.COLOURS.values()}
    # Rows: horizontal bands in which bucket colours span most of the chart (the legend's swatches are small).
    band_rows = [y for y, row in enumerate(image) if sum(p in buckets for p in row) > 300]
    bands = [y for k, y in enumerate(band_rows) if k == 0 or band_rows[k - 1] != y - 1]
    assert len(bands) == len(report.timeline.runs) == 2, bands
    # Node rows: thin bands of the node colour, one per node a run's history names, under that run's row.
    node_rows = [y for y, row in enumerate(image) if sum(p == rgb(html.NODE_BAR) for p in row) > 100]
    node_bands = [y for k, y in enumerate(node_rows) if k == 0 or node_rows[k - 1] != y - 1]
    nodes = {(m.run, m.node) for m in report.timeline.markers if m.node is not None}
    assert nodes == {(1, "n1"), (1, "n2"), (2, "n3")}
    assert len(node_bands) == len(nodes), node_bands
    # top to bottom: each run's nodes in the order their first event happened
    order = dict.fromkeys((m.run, m.node) for m in report.timeline.markers if m.node)
    node_band_of = dict(zip(order, node_bands, strict=True))
    assert bands[0] < node_bands[0] < node_bands[1] < bands[1] < node_bands[2], (bands, node_bands)
    chart_bottom = node_rows[-1]

    expected = Counter(m.kind for m in report.timeline.markers)
    for kind, colour in html.MARKS.items():
        where = {(x, y) for y, row in enumerate(image[:chart_bottom]) for x, p in enumerate(row) if p == rgb(colour)}
        assert components(where) == expected.get(kind, 0), kind
        # a node's event is drawn over that node's row: below its run's bar, above the next row
        for node in {(m.run, m.node) for m in report.timeline.markers if m.kind == kind and m.node is not None}:
            ys = sorted(y for _, y in where)
            own = node_band_of[node]
            above = max(b for b in [*bands, *node_bands] if b < own)
            assert above < ys[0] and ys[-1] < own, (kind, node, above, ys, own)

    gauge = max(sum(p == rgb(html.GAUGE) for p in row) for row in image)
    assert abs(gauge / 400 - report.goodput) <= 2 / 400, (gauge, report.goodput)

    dom = chromium("--dump-dom", page.as_uri(), cwd=tmp_path).stdout
    assert f'id="goodput">{report.goodput:.1%}<' in dom, dom[:500]
    assert "http://" not in page.read_text().replace('xmlns="http://www.w3.org/2000/svg"', "")
