"""Progress from the program's own output (spec section progress:): an unmodified GPT-style program under
`launcher: torchrun`, which never calls Preemption and prints `iter N: loss X`; `slurmgen status` and
`slurmgen report` show its real step and productive time, read by rank 0's supervisor from those lines."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from runtime.runtime_helpers import without_steering

from local.test_local_handlers import LocalJob
from local.test_local_recovery import own_port
from slurmgen import run_history

PY = sys.executable
PROGRAM = Path(__file__).parent / "data" / "gpt_iters.py"


@pytest.mark.slow
@pytest.mark.torch
def test_an_unmodified_torchrun_program_shows_its_printed_step_in_status_and_report(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    pytest.importorskip("torch")
    text = (
        f"name: job\ncommand: [{PY}, {str(PROGRAM)!r}, '60']\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\n"
        f"launcher: torchrun\nnproc_per_node: 2\npython: {PY}\n{own_port(tmp_path)}"
        "progress: {pattern: '^iter (\\d+):', total: 60}\n"
    )
    job = LocalJob(tmp_path, text)
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    rank0 = job.file("rank-0.log")
    printed = [int(n) for n in re.findall(r"^iter (\d+): loss [\d.]+, world 2$", rank0, re.M)]
    assert printed == list(range(1, 61)), job.everything()  # every line reached the rank's log, in order
    assert (tmp_path / "ckpt.pt").exists()
    events = run_history.read(str(tmp_path / "logs" / f"job-{job.job_id()}"))
    assert [e["steps"] for e in events if e["event"] == run_history.FIRST_STEP] == [1], events
    status = run_slurmgen("status", f"local-{job.job_id()}", cwd=tmp_path, env=without_steering())
    assert status.returncode == 0, status.stderr
    assert re.search(r"^step: 60/60 \(the last\)$", status.stdout, re.M), status.stdout
    done = run_slurmgen("report", f"local-{job.job_id()}", "--json", cwd=tmp_path, env=without_steering())
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    [run] = data["runs"]
    assert run["steps"] == printed[-1] == 60, data
    assert 0 < data["productive_seconds"] < data["wall_seconds"], data
    total = data["productive_seconds"] + sum(data["buckets"].values())
    assert abs(total - data["wall_seconds"]) <= 0.01 * data["wall_seconds"], data
    assert data["buckets"]["startup"] > 0, data
