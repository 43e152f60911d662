"""One odd line in a run history (a disk error, a damaged or foreign record: the file is the user's own, so the
trust rule believes it) costs that line, never the command: `slurmgen status`, `history` and `report` of a real
local run skip it with one warning naming the file and the line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_run import local_job_id, run_slurmgen

from slurmgen import run_history

ODD = {
    "nested deeper than the parser's stack": "[" * 100_000 + "]" * 100_000,
    "a text time": json.dumps({"v": 1, "event": "save", "run": 1, "time": "noon", "by": "rank0", "seconds": 1}),
    "a site that is text": json.dumps({"v": 1, "event": "run-start", "run": 1, "time": 1, "site": "REQUEUE"}),
    "a site with a list for a window": json.dumps(
        {"v": 1, "event": "run-start", "run": 1, "time": 1, "site": {"mode": "REQUEUE", "windows": {"x": [1]}}}
    ),
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local job (`slurmgen run`) that ran and finished: its history is real."""
    place = tmp_path_factory.mktemp("odd-history")
    (place / "job.yaml").write_text(
        f"name: job\ncommand: ['true']\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\npython: {sys.executable}\n"
    )
    done = run_slurmgen("run", "job.yaml", cwd=place)
    assert done.returncode == 0, done.stderr
    (place / "job-id").write_text(local_job_id(done))
    return place


@pytest.mark.parametrize("odd", list(ODD))
def test_one_odd_line_is_skipped_with_its_file_and_line_and_the_rest_is_shown(finished: Path, odd: str) -> None:
    job = (finished / "job-id").read_text()
    path = Path(run_history.history_dir(str(finished / "logs" / f"job-{job}"))) / "rank0.jsonl"
    path.write_text(ODD[odd] + "\n")
    try:
        for command in (["status", f"local-{job}"], ["history", f"local-{job}"], ["report", f"local-{job}"]):
            done = run_slurmgen(*command, cwd=finished)
            assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
            warned = [line for line in done.stderr.splitlines() if f"{path}:1: skipped" in line]
            assert len(warned) == 1, (command, done.stderr)
        history = run_slurmgen("history", f"local-{job}", cwd=finished)
        assert history.stdout.splitlines()[1].split()[0] == "1", history.stdout  # run 1, from the other lines
    finally:
        path.unlink()
