"""Restart inside the allocation in every `preemption.handler` mode and with both launchers, on whole local runs
(`slurmgen run --kill-rank R --after S`: a real SIGKILL to rank R's own program). The srun + `auto` case is
tests/local/test_local_recovery.py; these are the others, and what `status` and `history` say of a restart."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from runtime.runtime_helpers import without_steering

from local.test_local_handlers import LocalJob, own_command, spec
from local.test_local_recovery import own_port, restarts
from slurmgen import run_history

pytestmark = [pytest.mark.slow, pytest.mark.torch]

PY = sys.executable
WORKER = Path(__file__).resolve().parents[1] / "runtime" / "preempt_worker.py"


def slurmgen(job: LocalJob, *args: str) -> str:
    done = run_slurmgen(*args, cwd=job.cwd, env=without_steering())
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def check_restarted_once(job: LocalJob, rank: int) -> None:
    """The job completed in its first run after one restart of the step inside the allocation (no requeue)."""
    assert job.finish() == 0, job.everything()
    assert f"kill rehearsal: SIGKILL to rank {rank}'s program (pid " in job.runner, job.runner
    assert "COMPLETED, exit code 0, 1 run" in job.runner, job.runner
    batch = job.file("batch")
    assert "requeue issued" not in batch, batch
    [event] = restarts(job)
    assert (event["cause"], event["rank"], event["attempt"]) == ("crash", rank, 1), event


def test_a_program_using_the_runtime_restarts_and_status_and_history_show_the_steps_lost(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """handler: runtime. Rank 1's program SIGKILLs itself after step 50 (saves every 20, so the last is at 40):
    the step restarts, every rank resumes from step 40, and `status` and `history` show the restart with its
    cause, rank, node, steps and time lost. The steps lost are those made since that save."""
    die = f"1:50:{tmp_path / 'died'}"
    command = [PY, str(WORKER), "--dist", "--steps", "80", "--step-time", "0.1", "--save-every", "20", "--die-at", die]
    job = LocalJob(tmp_path, spec(command, preemption="{handler: runtime}", extra=own_port(tmp_path)))
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 1 run" in job.runner, job.runner
    [event] = restarts(job)
    assert (event["cause"], event["rank"], event["attempt"]) == ("crash", 1, 1), event
    for rank in range(4):
        log = job.file(f"rank-{rank}.log")
        assert re.findall(r"RESUMED (\d+) ", log) == ["40"] and "DONE 80" in log, job.everything()
    lost = event["steps_lost"]
    # 10, plus the step rank 0 had begun when rank 1 died (it counts its should_stop() call before the agreement
    # blocks), less what the last mark had not seen yet
    assert isinstance(lost, int) and 0 <= lost <= 11, event
    shown = f"crash: rank 1 on 127.0.0.1 (killed by SIGKILL), {lost} step{'' if lost == 1 else 's'} lost, "
    key = f"local-{job.job_id()}"
    assert shown in slurmgen(job, "history", key), slurmgen(job, "history", key)
    status = slurmgen(job, "status", key)
    assert f"run 1, restart 1 inside the allocation ({shown}" in status, status


@pytest.mark.parametrize("handler", ["requeue", "program"])
def test_an_unmodified_program_restarts_in_the_allocation_in_handler_mode(
    tmp_path: Path, jobs: list[LocalJob], handler: str
) -> None:
    """handler: requeue (the program knows nothing of slurmgen) and handler: program (it handles the signal
    itself): a crash of rank 2 restarts the step inside the allocation, and every rank resumes from the program's
    own last snapshot. No progress mark exists (the program never calls should_stop()): no steps lost are
    claimed."""
    extra = ["--handle", "USR1"] if handler == "program" else []
    command = own_command(tmp_path, *extra, steps=200)
    job = LocalJob(tmp_path, spec(command, preemption=f"{{handler: {handler}}}", extra=own_port(tmp_path)),
                   "--kill-rank", "2", "--after", "10")  # fmt: skip
    jobs.append(job)
    check_restarted_once(job, 2)
    [event] = restarts(job)
    assert event.get("steps_lost") is None, event
    assert re.search(r"DONE 200 \S+ rank=2", job.file("rank-2.log")), job.everything()


def test_torchrun_restarts_in_the_allocation_once_not_twice(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """launcher: torchrun (one agent per emulated node, two workers each). torchrun's own restarts are off
    (--max-restarts=0, rendered): worker rank 3's SIGKILL after step 50 ends its agent, the step ends, and the
    batch shell starts it again once, with a fresh rendezvous; torchrun does not restart the workers as well, and
    every worker resumes from the program's own snapshot of step 40. (The worker dies by itself rather than by
    --kill-rank: torchrun's own rendezvous makes the start-up too long to time a kill on a busy machine.)"""
    command = own_command(
        tmp_path, "--die-rank", "3", "--die-at", "50", "--die-once", str(tmp_path / "died"), steps=100
    )
    text = spec(command, extra=own_port(tmp_path)).replace("tasks_per_node: 2", "tasks_per_node: 1")
    text += "launcher: torchrun\nnproc_per_node: 2\n"
    job = LocalJob(tmp_path, text)
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 1 run" in job.runner, job.runner
    [event] = restarts(job)
    assert (event["cause"], event["rank"], event["attempt"]) == ("crash", 3, 1), event
    batch = job.file("batch")
    assert "requeue issued" not in batch, batch
    assert batch.count("rendezvous at 127.0.0.1:") == 2, batch
    done = [re.findall(r"DONE 100 (\S+) rank=(\d)", job.file(f"rank-{r}.log")) for r in range(4)]
    assert sorted(rank for found in done for _, rank in found) == ["0", "1", "2", "3"], job.everything()
    for rank in range(4):
        assert re.findall(r"RESUMED (\d+) ", job.file(f"rank-{rank}.log")) == ["40"], job.everything()


def test_a_killed_rank_beside_a_rank_that_takes_the_steps_term_for_a_stop_is_restarted(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """1 node x 2 tasks, handler: runtime, saves every 20 steps: `--kill-rank 1 --after 10` kills rank 1; srun's
    --kill-on-bad-exit sends rank 0 SIGTERM, which Preemption records as a stop. That stop is a casualty's, not
    one under way: the step restarts inside the allocation and the job completes. The ranks share no
    process group, so rank 0 learns of rank 1's death only from srun's SIGTERM and records its stop every time
    (with a group it often lost its peer first and exited 76, and the test passed without the fix); without
    batch/restart.py's casualty check this job ends FAILED 137 after one start."""
    command = [PY, str(WORKER), "--steps", "400", "--step-time", "0.05", "--save-every", "20"]
    text = spec(command, preemption="{handler: runtime}", extra="recovery: {max_restarts: 2}\n" + own_port(tmp_path))
    text = text.replace("nodes: 2\n", "nodes: 1\n")
    job = LocalJob(tmp_path, text, "--kill-rank", "1", "--after", "10")
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 1 run" in job.runner, job.runner
    [event] = restarts(job)
    assert (event["cause"], event["rank"]) == ("crash", 1), event


def test_a_crash_restart_that_then_completes_ends_completed_and_removes_its_state(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """The same job as above (no process group, Preemption only): rank 0 records a stop (terminated) when srun's
    --kill-on-bad-exit sends it TERM after rank 1's SIGKILL; the step restarts and both ranks run to their end.
    That stop belongs to the start that was restarted: the run's end decides from the last start, so the job
    ends COMPLETED with its resume state removed, and the batch log, history and status agree. (Before, the run's
    end took that stop for the run's: "stopped before its work was done (terminated): its resume state is kept",
    history's note "state kept" and the state file left behind.)"""
    # rank 1 kills itself once both ranks are in their loops (a --kill-rank at a fixed time can come while rank 0
    # still imports torch on a loaded machine: then it records no stop, and there is no seam to look at)
    die = f"1:40:{tmp_path / 'died'}"
    command = [PY, str(WORKER), "--steps", "300", "--step-time", "0.05", "--save-every", "20", "--die-at", die]
    text = spec(command, preemption="{handler: runtime}", extra="recovery: {max_restarts: 2}\n" + own_port(tmp_path))
    text = text.replace("nodes: 2\n", "nodes: 1\n")
    job = LocalJob(tmp_path, text)
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 1 run" in job.runner, job.runner
    events = run_history.read(str(tmp_path / "logs" / f"job-{job.job_id()}"))
    [restart] = [e for e in events if e.get("event") == run_history.RESTART]
    stops = [e for e in events if e.get("event") == run_history.STOP]
    # the seam itself: a stop was recorded in the start that was restarted
    assert [s.get("cause") for s in stops] == ["terminated"] and stops[0]["time"] < restart["time"], events
    batch = job.file("batch")
    assert "stopped before its work was done" not in batch, batch
    assert "the job completed: removed its resume state" in batch, batch
    [end] = [e for e in events if e.get("event") == run_history.RUN_END]
    assert end["ended"] == "completed", end
    assert not list((tmp_path / "logs" / "state").glob("*.state")), list((tmp_path / "logs" / "state").iterdir())
    key = f"local-{job.job_id()}"
    shown = slurmgen(job, "history", key)
    assert "state kept" not in shown and "terminated" not in shown, shown
    [run] = job.history()
    assert run.cause is None and run.ended == "completed" and len(run.restarts) == 1, run
    assert re.search(rf"^{key}\s+job\s+COMPLETED\s", slurmgen(job, "status", key), re.M)
