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


def browser() -> str:
    """Debian's chromium; installed with apt-get as root when missing, as the cluster harness installs Slurm
    (tests/cluster/up.sh). Elsewhere the test is skipped with the reason, and fails under CI."""
    found = shutil.which("chromium")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]
        if subprocess.run(install, env=env, capture_output=True, timeout=900, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600, check=False)
            subprocess.run(install, env=env, capture_output=True, timeout=900, check=False)
        found = shutil.which("chromium")
    if found is None:
        reason = "Debian's chromium is missing and could not be installed (as root: apt-get install chromium)"
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
