"""Rehearsals timed by rank 0's progress (`slurmgen run --preempt-at-step K`, `--kill-rank R --at-step K`,
`--step-wait S`): real local runs of short programs that say their step to slurmgen through Preemption or through
the spec's progress.pattern; the step they were at when the signal came is read back from their own logs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from runtime.runtime_helpers import without_steering

from slurmgen.exit_codes import EXIT_REHEARSAL_MISSED
from slurmgen.local.step_watch import RankZeroProgress
from slurmgen.progress_mark import node_dir_name, read_node_mark

PY = sys.executable

# Steps with Preemption: `STEP n` after step n, a save every 10, the stop it asks for (`STOP n`), `RESUMED n`.
WITH_PREEMPTION = """
import sys, time
from slurmgen.runtime import Preemption
pre = Preemption()
state = pre.load()
step = 0 if state is None else state["step"]
if state is not None:
    print(f"RESUMED {step}", flush=True)
while step < int(sys.argv[1]):
    time.sleep(0.05)
    step += 1
    print(f"STEP {step}", flush=True)
    if step % 10 == 0:
        pre.save({"step": step})
    if pre.should_stop(step=step):
        print(f"STOP {step}", flush=True)
        pre.save_and_exit({"step": step})
print("DONE", flush=True)
"""
# A program that knows nothing of slurmgen and prints its step (the spec's progress.pattern reads it).
PRINTS_STEPS = """
import sys, time
for step in range(1, int(sys.argv[1]) + 1):
    time.sleep(0.05)
    print(f"iter {step}: loss 0.5", flush=True)
"""


def job(where: Path, program: str, steps: int, extra: str = "") -> None:
    (where / "train.py").write_text(program)
    port = 20000 + zlib.crc32(str(where).encode()) % 9000  # other local jobs on the machine take the default
    command = [PY, str(where / "train.py"), str(steps)]
    (where / "job.yaml").write_text(
        f"name: job\ncommand: {json.dumps(command)}\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\npython: {PY}\n"
        f"distributed: {{port: {port}}}\npreemption: {{handler: runtime, lead_time: 120}}\n{extra}"
    )


def run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = without_steering()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    return subprocess.run([PY, "-m", "slurmgen", "run", "job.yaml", *args], cwd=where, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


def rank_log(where: Path) -> str:
    return (where / "logs" / "job-1" / "rank-0.log").read_text(errors="replace")


@pytest.mark.slow
def test_preempt_at_step_signals_once_rank_0_is_at_the_step_then_the_job_resumes(tmp_path: Path) -> None:
    job(tmp_path, WITH_PREEMPTION, 80)
    done = run(tmp_path, "--preempt-at-step", "30")
    assert done.returncode == 0, done.stderr
    [seen] = re.findall(r"--preempt-at-step 30: rank 0's program is at step (\d+)", done.stderr)
    assert int(seen) >= 30, done.stderr
    assert "SIGCONT, SIGUSR1 to the batch shell at step 30 (" in done.stderr, done.stderr
    log = rank_log(tmp_path)
    [stopped] = re.findall(r"^STOP (\d+)$", log, re.M)
    assert int(stopped) >= int(seen), log  # the signal came after the step, never before it
    assert f"RESUMED {stopped}" in log and "DONE" in log, log
    assert "COMPLETED, exit code 0, 2 runs" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_kill_at_step_then_a_preemption_of_the_restarted_program(tmp_path: Path) -> None:
    """The second step rehearsal counts only marks written after the first fired: the preemption comes to the
    restarted program (it printed RESUMED first), not to the dying one, although the dying one had passed its step."""
    job(tmp_path, WITH_PREEMPTION, 80, "recovery: {max_restarts: 1}\n")
    done = run(tmp_path, "--kill-rank", "0", "--at-step", "15", "--preempt-at-step", "16")
    assert done.returncode == 0, done.stderr
    assert "kill rehearsal: SIGKILL to rank 0's program (pid" in done.stderr, done.stderr
    log = rank_log(tmp_path)
    first_start = log.split("RESUMED", 1)[0]
    last_step = max(int(n) for n in re.findall(r"^STEP (\d+)$", first_start, re.M))
    assert last_step >= 15 and "STOP" not in first_start, log  # killed at the step, before any stop
    [stopped] = re.findall(r"^STOP (\d+)$", log, re.M)
    assert log.index(f"STOP {stopped}") > log.index("RESUMED"), log
    assert "COMPLETED, exit code 0, 2 runs" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_kill_at_step_of_a_program_whose_step_the_progress_pattern_reads(tmp_path: Path) -> None:
    """No Preemption: rank 0's supervisor reads the step from its output (progress.pattern) and marks it; recovery
    off, so the kill ends the job with the program's SIGKILL."""
    job(tmp_path, PRINTS_STEPS, 400, "recovery: false\nprogress: {pattern: '^iter (\\d+):'}\n")
    done = run(tmp_path, "--kill-rank", "0", "--at-step", "25")
    assert done.returncode == 137, done.stderr
    [seen] = re.findall(r"--kill-rank 0 --at-step 25: rank 0's program is at step (\d+)", done.stderr)
    steps = [int(n) for n in re.findall(r"^iter (\d+):", rank_log(tmp_path), re.M)]
    assert 25 <= int(seen) <= max(steps) < 400, (seen, steps[-3:])
    key = zlib.crc32(os.path.abspath(tmp_path / "logs" / "job-1").encode())
    assert not [d for d in os.listdir("/dev/shm") if d.startswith(f"slurmgen-{os.getuid()}-{key:08x}-")]


@pytest.mark.slow
def test_a_program_killed_before_it_recorded_its_last_step_gets_it_from_its_node_mark(tmp_path: Path) -> None:
    """SIGKILL runs no code of the program's, so nothing it does records its last step: the sample before the kill
    was up to a minute older (here the one 8 s after its first step, about step 160). Rank 0's supervisor records
    what the node mark held when it reaps it, at most a second behind; a program that ends by itself records its
    own last and marks it, so no second one is recorded for it."""
    job(tmp_path, WITH_PREEMPTION, 2000, "recovery: false\n")
    done = run(tmp_path, "--kill-rank", "0", "--at-step", "200")
    assert done.returncode == 137, done.stderr
    printed = max(int(n) for n in re.findall(r"^STEP (\d+)$", rank_log(tmp_path), re.M))
    status = subprocess.run([PY, "-m", "slurmgen", "status", "local-1"], cwd=tmp_path, env=without_steering(),
                            capture_output=True, text=True, timeout=60, check=False).stdout  # fmt: skip
    shown = re.search(r"^step: (\d+)", status, re.M)
    assert shown and 200 <= int(shown[1]) <= printed, (status, printed)
    events = [json.loads(line) for line in (tmp_path / "logs" / "job-1" / "history" / "rank0.jsonl").open()]
    last = [e for e in events if e.get("last")]
    assert [(e.get("from_mark"), e["step"]) for e in last] == [(True, int(shown[1]))], last

    ended = tmp_path / "ended"
    ended.mkdir()
    job(ended, WITH_PREEMPTION, 30, "recovery: false\n")
    assert run(ended).returncode == 0
    events = [json.loads(line) for line in (ended / "logs" / "job-1" / "history" / "rank0.jsonl").open()]
    assert [(e.get("from_mark"), e["step"]) for e in events if e.get("last")] == [(None, 30)], events


@pytest.mark.slow
def test_a_step_never_reached_is_given_up_after_step_wait_and_the_run_goes_on(tmp_path: Path) -> None:
    job(tmp_path, WITH_PREEMPTION, 120)
    done = run(tmp_path, "--preempt-at-step", "1000", "--step-wait", "4")
    assert done.returncode == EXIT_REHEARSAL_MISSED, done.stderr
    [given_up] = [line for line in done.stderr.splitlines() if "not reached" in line]
    assert re.search(r"--preempt-at-step 1000: step 1000 not reached in 4 s of run 1 \(--step-wait; rank 0 at step "
                     r"\d+\); not rehearsed, the run goes on", given_up), given_up  # fmt: skip
    assert "COMPLETED, exit code 0, 1 run" in done.stderr and "DONE" in rank_log(tmp_path), done.stderr
    [missed] = [line for line in done.stderr.splitlines() if "never fired" in line]
    assert "--preempt-at-step 1000 never fired: rank 0's program did not reach the step within --step-wait" in missed


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--preempt-at-step", "5"], "--preempt-at-step 5: job.yaml: slurmgen does not know the program's step"),
        (["--hang-rank", "0", "--at-step", "5"], "--hang-rank 0 --at-step 5: job.yaml: slurmgen does not know"),
        (["--kill-rank", "0", "--at-step", "5", "--after", "3"], "--after and --at-step: one moment"),
        (["--preempt-at-step", "5", "--preempt-after", "3"], "--preempt-after and --preempt-at-step: one moment"),
        (["--at-step", "5"], "--at-step goes with --kill-rank R or --hang-rank R, e.g. --kill-rank 1 --at-step 30"),
    ],
    ids=["unknown-progress-preempt", "unknown-progress-hang", "after-and-step", "two-preemptions", "no-rank"],
)
def test_a_step_rehearsal_is_refused_in_one_line_with_the_fix(tmp_path: Path, args: list[str], line: str) -> None:
    job(tmp_path, PRINTS_STEPS, 10)  # no Preemption, no progress.pattern: its step is unknown to slurmgen
    done = run(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    [said] = done.stderr.strip().splitlines()
    assert line in said, said
    if "does not know" in line:
        assert "progress: {pattern:" in said and "Preemption" in said, said
    assert not (tmp_path / "logs").exists()  # refused before anything ran


def test_rank_0_progress_counts_only_marks_written_since_its_moment() -> None:
    marks = {"127.0.0.2": (40, 100.0)}  # rank 0 runs on the step's second node (the first one was excluded)
    reads: list[str] = []

    def read(log_dir: str, node: str, rank: int) -> tuple[int, float] | None:
        reads.append(node)
        return marks.get(node) if rank == 0 else None

    progress = RankZeroProgress("/logs/job-1", ["127.0.0.1", "127.0.0.2"], since=99.0, read=read)
    assert progress.step() == 40 and reads == ["127.0.0.1", "127.0.0.2"]
    progress.since = 100.5  # a rehearsal fired: the mark above is the dying program's
    reads.clear()
    assert progress.step() is None and reads == ["127.0.0.2"]  # one read a poll once rank 0's node is known
    marks["127.0.0.2"] = (12, 101.0)  # the restarted program's first mark
    assert progress.step() == 12 and progress.seen == 12


def test_a_mark_in_a_directory_not_ours_is_not_read(tmp_path: Path) -> None:
    log_dir = str(tmp_path / "logs" / "job-1")
    folder = Path(node_dir_name(log_dir, "127.0.0.1"))
    folder.mkdir(mode=0o700)
    try:
        (folder / "rank-0").write_text("30\n")
        assert read_node_mark(log_dir, "127.0.0.1", 0) == (30, (folder / "rank-0").stat().st_mtime)
        folder.chmod(0o777)  # as another user's planted directory would be: anyone may write a mark there
        assert read_node_mark(log_dir, "127.0.0.1", 0) is None
    finally:
        (folder / "rank-0").unlink()
        folder.rmdir()
