"""A program that saves and resumes by itself (tests/local/data/gpt_resume.py: nanoGPT's manner, real torch over
gloo) under `slurmgen run`, with spec fields checkpoint.path and resume.args: a crash and a preemption each resume
from the program's own checkpoint, the report counts the work lost back to its last save, and a program that is
not told to resume loses its work in one line, not in silence. Real processes, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from local.test_local_handlers import LocalJob
from local.test_local_recovery import own_port

pytestmark = [pytest.mark.slow, pytest.mark.torch]

PY = sys.executable
PROGRAM = Path(__file__).resolve().parent / "data" / "gpt_resume.py"
ITERS = 400


def spec(cwd: Path, *extra_words: str, resume: bool = True) -> str:
    command = [PY, str(PROGRAM), "--max-iters", str(ITERS), "--eval-interval", "20", "--step-time", "0.05",
               *extra_words]  # fmt: skip
    return (
        f"name: job\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 2\npython: {PY}\n"
        "preemption: {handler: requeue}\ncheckpoint: {path: out/ckpt.pt}\n"
        f"progress: {{pattern: '^iter (\\d+):', total: {ITERS}}}\n"
        + ("resume: {args: [--init_from=resume]}\n" if resume else "")
        + own_port(cwd)
    )


def batch_shell(job: LocalJob, run: int) -> int:
    found = job.wait_for(lambda: re.search(rf"run {run} started.*: batch shell pid (\d+)", job.runner))
    assert isinstance(found, re.Match)
    return int(found[1])


def preempt(job: LocalJob, run: int) -> None:
    """What `--preempt-after` sends (local/rehearse.py), at a point of the program's own choosing: after a save."""
    pid = batch_shell(job, run)
    os.kill(pid, signal.SIGCONT)
    os.kill(pid, signal.SIGUSR1)


def starts(log: str, what: str = r"iter (\d+): ") -> list[list[int]]:
    """Rank 0's iterations (or, with ``what``, its saves), per start of the program (a start after the first
    opens with `resumed from iter`)."""
    out: list[list[int]] = [[]]
    for line in log.splitlines():
        if line.startswith("resumed from iter"):
            out.append([])
        elif found := re.match(what, line):
            out[-1].append(int(found[1]))
    return out


def saved_at(log: str) -> list[int]:
    return [int(n) for n in re.findall(r"saving checkpoint to out/ckpt.pt at iter (\d+)", log)]


def report(job: LocalJob) -> dict[str, object]:
    done = run_slurmgen("report", f"local-{job.job_id()}", "--json", cwd=job.cwd, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


def near(got: object, truth: int) -> bool:
    return isinstance(got, int) and abs(got - truth) <= max(0.1 * truth, 1)


def seconds_since(log: str, start: int, saved: int) -> float:
    """The time the program spent, by its own `time Tms` lines, on the iterations of its ``start``-th start (0:
    the first) after the one it saved at: the work that stop threw away."""
    out: list[list[tuple[int, float]]] = [[]]
    for line in log.splitlines():
        if line.startswith("resumed from iter"):
            out.append([])
        elif found := re.match(r"iter (\d+): .*, time ([\d.]+)ms$", line):
            out[-1].append((int(found[1]), float(found[2]) / 1000))
    return sum(t for it, t in out[start] if it >= saved)


def near_seconds(got: object, truth: float) -> bool:
    """Within 10% of the program's own time, and 1 s more: the time from its last iteration to the stop's record
    (the kill, and the poll that sees it), which no line of the program can tell."""
    return isinstance(got, float) and abs(got - truth) <= 0.1 * truth + 1.0


def test_a_crash_and_a_preemption_each_resume_from_the_programs_checkpoint_and_lose_only_what_came_after_it(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """Rank 1 dies of SIGKILL at iteration 118 (last save at 80): the step restarts inside the allocation with
    --init_from=resume and goes on from 81. After its next save the job is preempted: run 2 resumes from that
    save. Every iteration is done, the last is the final one, and each stop's lost iterations in `report --json`
    are those since the last save, as the program's own lines tell (within 10%)."""
    job = LocalJob(tmp_path, spec(tmp_path, "--die-at", "118", "--die-once", str(tmp_path / "died")))
    jobs.append(job)
    job.wait_for(lambda: len(starts(job.file("rank-0.log"))) == 2 and len(saved_at(job.file("rank-0.log"))) >= 5)
    preempt(job, 1)  # after the restarted start's second save (120, 140; the first start saved 20, 60 and 80)
    assert job.finish() == 0, job.everything()
    log = job.file("rank-0.log")
    first, second, third = starts(log)
    saves = starts(log, r"saving checkpoint to out/ckpt.pt at iter (\d+)")
    assert saves[0] == [20, 60, 80] and len(saves[1]) >= 2
    assert re.findall(r"resumed from iter (\d+)", log) == ["80", str(saves[1][-1])]
    assert second[0] == 80 and max(first) == 117  # rank 0 waits in the all-reduce rank 1 never joined
    assert third[-1] == ITERS and log.count(f"DONE {ITERS}") == 1
    assert sorted(set(first + second + third)) == list(range(ITERS + 1))  # nothing skipped
    assert third[0] == saves[1][-1]
    assert "slurmgen: resuming from out/ckpt.pt (run 1, restart 1): --init_from=resume" in job.file("127.0.0.1.log")
    assert "slurmgen: resuming from out/ckpt.pt (run 2): --init_from=resume" in job.file("127.0.0.1.log")
    # The iterations done again: from the saved one (a save comes before its iteration's step) to the last done.
    truth = [max(first) - 80 + 1, max(second) - saves[1][-1] + 1]
    data = report(job)
    shown = data["program_checkpoint"]
    assert isinstance(shown, dict)
    stops = shown["stops"]
    assert [s["kind"] for s in stops] == ["restart", "requeue"], stops
    assert near(stops[0]["lost_steps"], truth[0]) and near(stops[1]["lost_steps"], truth[1]), (stops, truth)
    spent = [seconds_since(log, 0, 80), seconds_since(log, 1, saves[1][-1])]
    assert near_seconds(stops[0]["lost_seconds"], spent[0]), (stops, spent)
    assert near_seconds(stops[1]["lost_seconds"], spent[1]), (stops, spent)
    assert near(data["redone_steps"], sum(truth)), (data["redone_steps"], truth)  # the restart's and the requeue's
    assert shown["saves"] >= 5 and not shown["ignored"]


def test_a_requeued_program_that_does_not_resume_is_said_at_its_first_progress_in_every_view(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """handler requeue and no resume.args: run 2 starts over at iteration 0 although the program's checkpoint is
    there. One line names the checkpoint and the fix, in the batch log while run 2 still runs, and in `status`,
    `history` and `report`."""
    job = LocalJob(tmp_path, spec(tmp_path, resume=False))
    jobs.append(job)
    job.wait_for(lambda: len(saved_at(job.file("rank-0.log"))) >= 3)
    preempt(job, 1)
    said = "run 2 started at step 0 although "
    job.wait_for(lambda: said in job.file("batch"))
    assert job.proc.poll() is None  # said at the first progress line, not at the job's end
    batch = job.file("batch")
    line = next(line for line in batch.splitlines() if said in line)
    assert re.search(r"out/ckpt.pt \(saved \d\d:\d\d:\d\d, run 1, step \d+\) exists: the program does not "
                     r"resume by itself; give it resume.args", line), line  # fmt: skip
    key = f"local-{job.job_id()}"
    job.proc.send_signal(signal.SIGINT)  # enough: the rest is the program starting over
    job.proc.wait(timeout=60)
    status = run_slurmgen("status", key, cwd=tmp_path, timeout=60)
    history = run_slurmgen("history", key, cwd=tmp_path, timeout=60)
    for shown in (status.stdout + status.stderr, history.stdout + history.stderr):
        assert said in shown and "give it resume.args" in shown, shown
    program = report(job)["program_checkpoint"]
    assert isinstance(program, dict)
    [ignored] = program["ignored"]
    assert ignored.startswith(said) and "give it resume.args" in ignored
