"""The HTML report in a real headless browser (Debian's `chromium`): a screenshot of the page shows one timeline
row per run, one marker per event (counted by colour in the pixels), and the goodput gauge filled to the goodput;
the page's text shows the goodput figure. The page loads nothing: it is written to a directory and opened as a
file, with the network off."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from goodput.png_pixels import Pixel, read_png
from goodput.test_goodput import T0, crash_hang_preempt
from slurmgen.goodput import html, summary

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium")


def browser() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is needed in CI: apt-get install chromium (docs: development)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; docs: development)")
    return CHROMIUM


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


def test_the_picture_shows_a_row_per_run_a_marker_per_event_and_the_goodput(tmp_path: Path) -> None:
    report = summary.report("42", crash_hang_preempt(), now=T0 + 5000)
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
    chart_bottom = band_rows[-1]

    expected = Counter(m.kind for m in report.timeline.markers)
    for kind, colour in html.MARKS.items():
        where = {(x, y) for y, row in enumerate(image[:chart_bottom]) for x, p in enumerate(row) if p == rgb(colour)}
        assert components(where) == expected.get(kind, 0), kind

    gauge = max(sum(p == rgb(html.GAUGE) for p in row) for row in image)
    assert abs(gauge / 400 - report.goodput) <= 2 / 400, (gauge, report.goodput)

    dom = chromium("--dump-dom", page.as_uri(), cwd=tmp_path).stdout
    assert f'id="goodput">{report.goodput:.1%}<' in dom, dom[:500]
    assert "http://" not in page.read_text().replace('xmlns="http://www.w3.org/2000/svg"', "")
