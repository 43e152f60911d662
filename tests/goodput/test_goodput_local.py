"""Goodput on whole local runs (`slurmgen run`: the rendered script, the fake Slurm commands, real processes and
real signals): `slurmgen status` of a running job shows its step and rate; after a crash restart and a preemption,
`slurmgen report` accounts for the whole wall time and counts the redone steps the restart recorded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from local.test_local_handlers import LocalJob
from runtime.runtime_helpers import without_steering

from slurmgen import run_history

pytestmark = [pytest.mark.slow]

PROGRAM = Path(__file__).parent / "steps_program.py"


def spec(steps: int) -> str:
    return (f"name: job\ncommand: [{sys.executable!r}, {str(PROGRAM)!r}, '{steps}']\ntime: '00:10:00'\nnodes: 1\n"
            f"tasks_per_node: 1\npython: {sys.executable}\npreemption: {{}}\n")  # fmt: skip


def events(job: LocalJob) -> list[dict[str, object]]:
    return run_history.read(str(job.cwd / "logs" / f"job-{job.job_id()}"))


def test_status_of_a_running_local_job_shows_its_step_and_rate(tmp_path: Path, jobs: list[LocalJob]) -> None:
    job = LocalJob(tmp_path, spec(4000))
    jobs.append(job)
    job.wait_for(lambda: sum(e.get("event") == run_history.PROGRESS for e in events(job)) >= 2)
    done = run_slurmgen("status", f"local-{job.job_id()}", cwd=tmp_path, env=without_steering())
    assert done.returncode == 0, done.stderr
    step = re.search(r"^step: (\d+)/4000 \(sampled", done.stdout, re.M)
    rate = re.search(r"^rate: ([\d.]+) steps/s", done.stdout, re.M)
    assert step and int(step[1]) > 0, done.stdout
    # 0.05 s steps, at most 20 a second; a save (torch's first import) inside the interval makes it fewer
    assert rate and 0 < float(rate[1]) <= 21, done.stdout
    assert re.search(r"^eta to total_steps: ", done.stdout, re.M), done.stdout
    assert re.search(r"^goodput so far: \d+\.\d%", done.stdout, re.M), done.stdout


def test_report_after_a_crash_restart_and_a_preemption(tmp_path: Path, jobs: list[LocalJob]) -> None:
    # killed at 20 s of run 1: past the start-up of a loaded machine (about 10 s), so steps are lost
    # and preempted at 50 s, after the restarted program is under way again
    job = LocalJob(tmp_path, spec(1200), "--kill-rank", "0", "--after", "20", "--preempt-after", "50")
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    done = run_slurmgen("report", f"local-{job.job_id()}", "--json", cwd=tmp_path, env=without_steering())
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["runs"]) == 2, data["runs"]
    total = data["productive_seconds"] + sum(data["buckets"].values())
    assert abs(total - data["wall_seconds"]) <= 0.01 * data["wall_seconds"], data
    [restart] = [e for e in events(job) if e.get("event") == run_history.RESTART]
    recorded = restart.get("steps_lost")
    assert isinstance(recorded, int), restart
    # the program saves step 40 before its should_stop(step=40): the save says 39 calls, and the next start's first
    # sample (step 41, one step made) tells it began at 40, one step fewer lost than the restart counted (the same,
    # where a loaded machine's start-up took the kill before the first save and the next start began from scratch)
    assert data["redone_steps"] == run_history.steps_lost(events(job), restart) in (recorded, recorded - 1)
    assert data["buckets"]["redone"] > 0 and data["buckets"]["startup"] > 0 and data["buckets"]["queue"] > 0
    assert 0 < data["goodput"] < 1
    kinds = [m["kind"] for m in data["markers"]]
    assert "crash" in kinds and "preemption" in kinds and "requeue" in kinds, kinds
    page = tmp_path / "report.html"
    shown = run_slurmgen("report", f"local-{job.job_id()}", "--html", str(page), cwd=tmp_path, env=without_steering())
    assert shown.returncode == 0 and "<svg" in page.read_text(), shown.stderr
    doctor = run_slurmgen("doctor", f"local-{job.job_id()}", cwd=tmp_path, env=without_steering())
    assert doctor.returncode == 0, doctor.stderr
    # Both interruptions were rehearsals (each recorded as such by the local run): no rate to advise an interval on.
    assert [e["what"] for e in events(job) if e.get("event") == run_history.REHEARSAL] == ["kill", "preempt"]
    assert data["advice"] is None and data["advice_note"].startswith("checkpoint interval: not advised: the only "
                                                                     "interruptions were rehearsals"), data  # fmt: skip
    assert data["advice_note"] in doctor.stdout and "optimum save interval" not in doctor.stdout, doctor.stdout


def test_status_of_an_ended_local_job_shows_its_last_step_without_rate_or_eta(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """120 steps of 0.05 s: the regular samples come at 1, 2, 4 s after the first step, all mid-run. The program's
    end records one more, the last: status of the ended job shows step 120 of 120 as the last, with no rate, no
    ETA and no time since the last save measured against the clock. (Before, it showed a mid-run step such as
    48/120, a rate, "last save: 2 s ago" and an ETA.)"""
    job = LocalJob(tmp_path, spec(120))
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    [last] = [e for e in events(job) if e.get("last")]
    assert last["event"] == run_history.PROGRESS and last["step"] == 120, last
    done = run_slurmgen("status", f"local-{job.job_id()}", cwd=tmp_path, env=without_steering())
    assert done.returncode == 0, done.stderr
    assert re.search(r"^run: 1 \(ended\)$", done.stdout, re.M), done.stdout
    assert re.search(r"^step: 120/120 \(the last\)$", done.stdout, re.M), done.stdout
    assert not re.search(r"^(rate|eta to total_steps|time limit in): ", done.stdout, re.M), done.stdout
    assert re.search(r"^last save: .* before the run's end$", done.stdout, re.M), done.stdout


def test_restarts_inside_the_allocation_are_counted_beside_the_requeues_everywhere(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """The program SIGKILLs itself at step 60 once: the step restarts inside the allocation and the job completes
    in its one run. status's table, `slurmgen.Job.restarts()`, `report --json` and history all say 1 restart and
    0 requeues. (Before, a local job's status table had its REQUEUES only.)"""
    command = spec(200).replace(f"{str(PROGRAM)!r}, '200'", f"{str(PROGRAM)!r}, '200', --die-at, '60', --once, "
                                                             f"{str(tmp_path)!r}")  # fmt: skip
    job = LocalJob(tmp_path, command)
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    key = f"local-{job.job_id()}"
    done = run_slurmgen("status", key, cwd=tmp_path, env=without_steering())
    assert done.returncode == 0, done.stderr
    head, row = done.stdout.splitlines()[:2]
    cells = dict(zip(re.split(r"\s{2,}", head.strip()), re.split(r"\s{2,}", row.strip()), strict=False))
    assert (cells["STATE"], cells["REQUEUES"], cells["STEP RESTARTS"]) == ("COMPLETED", "0", "1"), done.stdout
    api = subprocess.run([sys.executable, "-c", f"import slurmgen; print(slurmgen.Job({key!r}).restarts())"],
                         cwd=tmp_path, env=without_steering(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert api.stdout.strip() == "{'requeues': 0, 'restarts': 1}", api.stderr
    report = run_slurmgen("report", key, "--json", cwd=tmp_path, env=without_steering())
    data = json.loads(report.stdout)
    assert (data["requeues"], data["restarts"], [r["restarts"] for r in data["runs"]]) == (0, 1, [1]), data
    history = run_slurmgen("history", key, cwd=tmp_path, env=without_steering())
    assert "restart 1 (crash: rank 0 on " in history.stdout and "restart 2" not in history.stdout, history.stdout
