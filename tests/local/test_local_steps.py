"""Spec field steps on whole local runs (`slurmgen run`: the rendered script, fake srun/scontrol/scancel, real
processes and signals): the command runs N times in one allocation, setup once, and a requeue resumes at the step
that was interrupted. The same on the real cluster: tests/manage/test_submit_cluster.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from runtime.runtime_helpers import without_steering

from local.test_local_handlers import PROGRAMS, LocalJob, spec

pytestmark = pytest.mark.slow

PY = sys.executable


def steps_spec(tmp_path: Path, preemption: str, *wait: str) -> str:
    command = [PY, str(PROGRAMS), "steps", str(tmp_path / "steps.txt"), *wait]
    text = spec(command, preemption=preemption, extra=f"steps: 3\nsetup: ['echo setup >> {tmp_path / 'setup.txt'}']\n")
    return text.replace("nodes: 2\n", "nodes: 1\n")


def test_three_steps_run_one_after_another_in_one_allocation(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """steps: 3: setup runs once, the command three times (SLURMGEN_STEP_INDEX 0, 1, 2) in the one run, and the run
    history records each step as done."""
    job = LocalJob(tmp_path, steps_spec(tmp_path, "false"))
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 1 run" in job.runner, job.runner
    assert (tmp_path / "steps.txt").read_text().splitlines() == ["0 0", "1 0", "2 0"], job.everything()
    assert (tmp_path / "setup.txt").read_text() == "setup\n"
    batch = job.file("batch")
    assert "step 1 of 3 completed; step 2 starts" in batch and "step 2 of 3 completed; step 3 starts" in batch
    (run,) = job.history()
    assert (run.steps_done, run.steps, run.exit_code) == ([0, 1, 2], 3, 0)


def test_a_preemption_in_step_2_resumes_step_2_not_step_1(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """steps: 3, handler: requeue: USR1 during step 2 (index 1) of the first run stops it and requeues the job;
    the second run runs setup again, then starts at step 2, not step 1, and completes steps 2 and 3."""
    job = LocalJob(tmp_path, steps_spec(tmp_path, "{handler: requeue}", "wait"))
    jobs.append(job)
    job.wait_text("rank-0.log", "rank 0 waiting")
    job.signal("USR1")
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 2 runs" in job.runner, job.runner
    assert (tmp_path / "steps.txt").read_text().splitlines() == ["0 0", "1 0", "1 1", "2 1"], job.everything()
    assert (tmp_path / "setup.txt").read_text() == "setup\nsetup\n"
    first, second = job.history()
    assert (first.steps_done, first.requeued_by) == ([0], "batch-shell"), first
    assert (second.steps_done, second.exit_code) == ([1, 2], 0), second
    shown = run_slurmgen("history", f"local-{job.job_id()}", cwd=tmp_path, env=without_steering())
    assert shown.returncode == 0, shown.stderr
    assert "step 1 of 3 done" in shown.stdout and "steps 2, 3 of 3 done" in shown.stdout, shown.stdout
