"""Requeue round trip on the local cluster: from the signal to the restarted task running, with slurmgen,
against Slurm's own floor: `scontrol requeue` of a trivial job to its restart.

    source /tmp/slurmgen-cluster/env.sh && python bench/preempt_requeue.py [--runs 5]

Both jobs run on one node with one task. The floor job is a two-line script that prints a line when it starts;
the slurmgen job is jobs/train_tiny.py in a rendered script, preempted with `scancel --batch --signal=USR1` (the
path of the time-based signal). "Restarted" means the restarted batch script printed its first line (the
restart's own start-up, torch's import, is the same with or without slurmgen and is reported apart). Goal:
under 0.5 s added by slurmgen.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurmgen.script.render import render  # noqa: E402
from slurmgen.spec.load import load_text  # noqa: E402

POLL = 0.01


def sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def wait_lines(path: Path, pattern: str, count: int, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while time.monotonic() < deadline:
        if path.exists() and len(regex.findall(path.read_text(errors="replace"))) >= count:
            return time.time()
        time.sleep(POLL)
    raise SystemExit(f"timed out waiting for {pattern!r} x{count} in {path}")


def floor_once(tmp: Path) -> float:
    script = tmp / "floor.sh"
    log = tmp / "floor.log"
    log.unlink(missing_ok=True)
    script.write_text("#!/bin/bash\n#SBATCH --requeue\n#SBATCH --open-mode=append\necho started\nsleep 300\n")
    job = sh("sbatch", "--parsable", "-N1", "-n1", "-t", "10", "-o", str(log), str(script))
    wait_lines(log, r"started", 1)
    start = time.time()
    sh("scontrol", "requeue", job)
    end = wait_lines(log, r"started", 2)
    sh("scancel", job)
    return end - start


def slurmgen_once(tmp: Path) -> tuple[float, float]:
    name = "bench-requeue"
    spec = load_text(
        f"name: {name}\ncommand: [{sys.executable}, {ROOT / 'jobs' / 'train_tiny.py'}, --steps, '100000', "
        f"--step-time, '0.01', --save-every, '0']\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\n"
        f"python: {sys.executable}\noutput: {tmp}/logs\ndistributed: {{backend: gloo}}\n",
        "bench.yaml",
    ).spec
    script = tmp / "job.sbatch"
    script.write_text(render(spec))
    (tmp / "logs").mkdir(exist_ok=True)
    job = sh("sbatch", "--parsable", str(script))
    batch = tmp / "logs" / f"{name}-{job}.log"
    node_log_dir = tmp / "logs" / f"{name}-{job}"
    wait_lines_in_dir(node_log_dir, r"start at step 0", 1)
    start = time.time()
    sh("scancel", "--batch", "--signal=USR1", job)
    restarted = wait_lines(batch, rf"job {job}, run 2,", 1)
    task = wait_lines_in_dir(node_log_dir, r"run 2,", 1)
    sh("scancel", job)
    return restarted - start, task - restarted


def wait_lines_in_dir(directory: Path, pattern: str, count: int, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while time.monotonic() < deadline:
        text = "".join(p.read_text(errors="replace") for p in directory.glob("*.log")) if directory.exists() else ""
        if len(regex.findall(text)) >= count:
            return time.time()
        time.sleep(POLL)
    raise SystemExit(f"timed out waiting for {pattern!r} in {directory}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("export SLURM_CONF first: source /tmp/slurmgen-cluster/env.sh")
    floors, ours, startup = [], [], []
    with tempfile.TemporaryDirectory(prefix="slurmgen-requeue-") as tmp:
        for run in range(args.runs):
            work = Path(tmp) / f"run{run}"
            work.mkdir()
            floors.append(floor_once(work))
            mine, task = slurmgen_once(work)
            ours.append(mine)
            startup.append(task)
    f, m = statistics.median(floors), statistics.median(ours)
    print(f"{'what':58} {'median s':>9}   runs")
    print(
        f"{'Slurm floor: scontrol requeue -> batch script restarted':58} {f:9.2f}   "
        + ", ".join(f"{x:.2f}" for x in floors)
    )
    print(
        f"{'slurmgen: signal -> save, requeue -> batch script restarted':58} {m:9.2f}   "
        + ", ".join(f"{x:.2f}" for x in ours)
    )
    print(f"{'added by slurmgen (goal < 0.5 s)':58} {m - f:9.2f}")
    print(f"{'(then: restarted batch script -> task running, torch import)':58} {statistics.median(startup):9.2f}")
    print(f"\n{args.runs} runs, 1 node x 1 task, load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
