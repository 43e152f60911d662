"""Jobs on the real test cluster for the preemption tests: a spec for jobs/train_tiny.py (2 nodes x 2 ranks, gloo,
DDP), submitting its rendered script, reading its logs and run history, and checking a resume."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from slurmgen import run_history
from slurmgen.script.render import render
from slurmgen.spec.load import load_text

ROOT = Path(__file__).resolve().parent.parent.parent
TRAIN = ROOT / "jobs" / "train_tiny.py"
WORKER = ROOT / "tests" / "runtime" / "preempt_worker.py"
OWN = ROOT / "tests" / "runtime" / "own_checkpoint.py"
PY = sys.executable


def spec_text(
    out: Path,
    name: str,
    *,
    steps: int,
    step_time: float,
    extra: str = "",
    time_limit: str = "00:10:00",
    command: list[str] | None = None,
) -> str:
    cmd = command or [PY, str(TRAIN), "--light"]  # no DDP, no torch.optim: 2.9 s less CPU per rank (jobs/train_tiny.py)
    args = [*cmd, "--steps", str(steps), "--step-time", str(step_time), "--save-every", "100"]
    return (
        f"name: {name}\n"
        f"command: {args!r}\n"
        f"time: '{time_limit}'\n"
        "nodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\n"
        f"python: {PY}\n"
        f"output: {out}/logs\n"
        "distributed: {backend: gloo, timeout: 60, barrier_timeout: 30}\n"
        f"{extra}"
    )


def submit(cluster, tmp: Path, text: str, *sbatch_args: str) -> str:  # type: ignore[no-untyped-def]
    spec = load_text(text, "test.yaml").spec
    script = tmp / "job.sbatch"
    script.write_text(render(spec))
    (tmp / "logs").mkdir(exist_ok=True)
    return str(cluster.submit(script, *sbatch_args))


def logs(tmp: Path, name: str, key: str) -> str:
    """Everything the job wrote: the batch log and every per-node log (appended across runs)."""
    parts = [tmp / "logs" / f"{name}-{key}.log", *sorted((tmp / "logs" / f"{name}-{key}").glob("*.log"))]
    return "\n".join(p.read_text(errors="replace") for p in parts if p.exists())


def wait_for_text(tmp: Path, name: str, key: str, pattern: str, count: int = 1, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = logs(tmp, name, key)
        if len(re.findall(pattern, text)) >= count:
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} x{count} never appeared:\n{text[-4000:]}")
        time.sleep(0.2)


def job_history(tmp_path: Path, name: str, job: str) -> list[run_history.Run]:
    return run_history.runs(run_history.read(str(tmp_path / "logs" / f"{name}-{job}")))


def scancel(cluster, *args: str) -> None:  # type: ignore[no-untyped-def]
    result = cluster.run(["scancel", *args])
    assert result.returncode == 0, result.stderr


def check_resume(text: str) -> None:
    """The weights printed at the stop equal the weights loaded at the resume, at the same step."""
    stops = re.findall(r"stopping after step (\d+), weights (\S+)", text)
    resumes = re.findall(r"resumed weights (\S+) at step (\d+)", text)
    assert stops and resumes, text[-3000:]
    assert (stops[0][0], stops[0][1]) == (resumes[0][1], resumes[0][0])


def submit_own(  # type: ignore[no-untyped-def]
    cluster, tmp: Path, name: str, *, steps: int, tasks_per_node: int, recovery: str, extra: tuple[str, ...] = (),
    spec_lines: str = "",
) -> str:  # fmt: skip
    """Submit tests/runtime/own_checkpoint.py (2 nodes, gloo, a save every 20 steps) with this `recovery:` (and
    ``spec_lines``, more fields of the spec)."""
    command = [PY, str(OWN), "--steps", str(steps), "--step-time", "0.05", "--save-every", "20",
               "--snapshot", str(tmp / f"{name}.pt"), *extra]  # fmt: skip
    text = (
        f"name: {name}\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: {tasks_per_node}\n"
        f"cpus_per_task: 1\npython: {PY}\noutput: {tmp}/logs\n"
        "distributed: {backend: gloo, timeout: 60, barrier_timeout: 30}\n"
        f"recovery: {recovery}\n{spec_lines}"
    )
    script = tmp / f"{name}.sbatch"
    script.write_text(render(load_text(text, "test.yaml").spec))
    (tmp / "logs").mkdir(exist_ok=True)
    return str(cluster.submit(script))


def read_log(tmp: Path, name: str, job: str, file: str) -> str:
    """A job's batch log (``file`` "batch") or a file of its log directory; "" while it does not exist."""
    path = tmp / "logs" / (f"{name}-{job}.log" if file == "batch" else f"{name}-{job}/{file}")
    return path.read_text(errors="replace") if path.exists() else ""
