"""What the integration tests share: the job spec of each example program, its local run, and reading its logs.

The three programs in data/ print the same lines, so one set of checks serves them all:
`rank R/W: start at step S, weights D` (every rank, at the start of each run), `rank 0: checkpoint at step S,
weights D` (at the framework's save), `rank R: final weights D at step S` (every rank, at the end). D is a hash of
the parameters' exact values.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_run import slurmgen_argv
from runtime.runtime_helpers import free_low_port, without_steering

from slurmgen import run_history

DATA = Path(__file__).parent / "data"
PY = sys.executable
STEPS = 100
# Frameworks whose program is another's with flags (default: data/train_<framework>.py): lightning_native is the
# Lightning program with Lightning's own SLURM auto-requeue in place of slurmgen's callback, every rank pausing at
# step PAUSE_AT of its first run (PAUSING) for the signal to reach them all in the same step (train_lightning.py).
PAUSE_AT = 10
PROGRAMS = {"lightning_native": ["train_lightning.py", "--lightning-requeue", "--pause-at", str(PAUSE_AT)]}
STEP_TIME = 0.3  # the preempted runs sleep this long per step: 30 s of training for the signal to land in
FRAMEWORKS = ("lightning", "transformers", "accelerate")

# Ranks of a node share its log, and a message and its newline may be two writes: two messages can share a line,
# so the patterns never rely on line ends (a digest is exactly 16 hex digits).
START = re.compile(r"rank (\d)/(\d): start at step (\d+), weights ([0-9a-f]{16})")
SAVED = re.compile(r"rank 0: checkpoint at step (\d+), weights ([0-9a-f]{16})")
FINAL = re.compile(r"rank (\d): final weights ([0-9a-f]{16}) at step (\d+)")
PAUSING = re.compile(r"rank (\d): pausing at step (\d+)")


def needs(module: str) -> None:
    """Skip when the framework is not installed; with CI set, fail: CI installs them (the dev extra)."""
    if importlib.util.find_spec(module) is None:
        reason = f"needs {module}: pip install -e '.[dev]' installs it"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the integration tests: {reason}", pytrace=False)
        pytest.skip(reason)


def spec_text(framework: str, out: Path, *, step_time: float = 0.0, env: str = "") -> str:
    """2 nodes x 2 ranks of one example program, everything it writes under `out`. The rendezvous port is one
    that is free now, not the default: other local jobs on this machine would use the default's (job id 1)."""
    program, *flags = PROGRAMS.get(framework, [f"train_{framework}.py"])
    command = [PY, str(DATA / program), *flags, "--steps", str(STEPS), "--step-time", str(step_time)]
    if framework == "transformers":
        command += ["--output-dir", str(out / "hf-output")]
    return (
        f"name: {framework}\n"
        f"command: {command!r}\n"
        "time: '00:10:00'\n"
        "nodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\n"
        f"python: {PY}\n"
        f"chdir: {out}\n"
        f"output: {out}/logs\n"
        f"distributed: {{backend: gloo, port: {free_low_port()}, port_range: 1, timeout: 60, barrier_timeout: 30}}\n"
        "preemption: {max_requeues: 3}\n"
        f"env: {{OMP_NUM_THREADS: '1'{env}}}\n"
    )


def job_logs(out: Path, framework: str, job: str) -> str:
    """The batch log and every per-node log of the job (all runs: they are appended)."""
    logs = out / "logs"
    parts = [logs / f"{framework}-{job}.log", *sorted((logs / f"{framework}-{job}").glob("*.log"))]
    return "\n".join(p.read_text(errors="replace") for p in parts if p.exists())


@dataclass(frozen=True)
class LocalRun:
    code: int
    job: str  # the local job id (the first one whose rendezvous port is free)
    runner: str  # the runner's own lines (stderr of slurmgen run --local)
    logs: str
    seconds: float


def start_local(
    framework: str, out: Path, *args: str, step_time: float = 0.0, env: str = ""
) -> subprocess.Popen[bytes]:
    """Start `slurmgen run --local` of the example program in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    spec = out / f"{framework}.yaml"
    spec.write_text(spec_text(framework, out, step_time=step_time, env=env))
    with open(out / "runner.err", "wb") as err:
        return subprocess.Popen(
            slurmgen_argv("run", "--local", str(spec), *args), cwd=out, env=without_steering(), stderr=err
        )


def finish_local(proc: subprocess.Popen[bytes], framework: str, out: Path, started: float) -> LocalRun:
    try:
        code = proc.wait(timeout=540)
    finally:
        if proc.poll() is None:  # Ctrl-C: the runner ends every process of the job
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    seconds = time.monotonic() - started
    runner = (out / "runner.err").read_text()
    found = re.search(r"local-(\d+):", runner)
    job = found[1] if found else "?"
    return LocalRun(code, job, runner, job_logs(out, framework, job), seconds)


def run_local(framework: str, out: Path, *args: str, step_time: float = 0.0, env: str = "") -> LocalRun:
    """`slurmgen run --local` of the example program in `out`, to its end."""
    started = time.monotonic()
    proc = start_local(framework, out, *args, step_time=step_time, env=env)
    return finish_local(proc, framework, out, started)


def final_digest(logs: str) -> str:
    """The weights every rank ended with; they must agree."""
    finals = FINAL.findall(logs)
    assert sorted(rank for rank, _, _ in finals) == ["0", "1", "2", "3"], logs[-4000:]
    assert {(digest, step) for _, digest, step in finals} == {(finals[0][1], str(STEPS))}, finals
    return str(finals[0][1])


def check_preempted_once(logs: str, reference: str) -> int:
    """One stop, saved by the framework, resumed by all four ranks from exactly what was saved, ending with the
    weights of the uninterrupted run. Returns the step of the stop."""
    tail = logs[-6000:]
    starts = START.findall(logs)
    assert {world for _, world, _, _ in starts} == {"4"}, tail  # one process group of 4, not 4 trainings alone
    first = [s for s in starts if s[2] == "0"]
    resumed = [s for s in starts if s[2] != "0"]
    assert len(first) == 4 and len(resumed) == 4, tail
    saves = SAVED.findall(logs)
    assert len(saves) == 1, tail
    step, saved = saves[0]
    assert 0 < int(step) < STEPS
    assert {(s[2], s[3]) for s in resumed} == {(step, saved)}, tail  # every rank resumed what was saved
    assert logs.count("requeue issued for job") == 1, tail
    assert logs.count("resuming from the checkpoint") == 1, tail
    assert final_digest(logs) == reference  # as if never interrupted
    return int(step)


def check_history(log_dir: Path, cause: str) -> None:
    """The job's run history: rank 0 requeued run 1 for `cause`; run 2 ran to its end."""
    runs = run_history.runs(run_history.read(str(log_dir)))
    assert [(r.run, r.cause, r.requeued_by) for r in runs] == [(1, cause, "rank0"), (2, None, None)], runs
