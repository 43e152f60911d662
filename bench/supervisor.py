"""What the task's supervisor costs: its memory, and the start-up it adds before the program runs.

    python bench/supervisor.py [--reps 20]

- RSS: the supervisor's VmRSS (/proc/<pid>/status) while its program runs, next to a bare `python3 -c` program's;
- start-up: wall time of `launch -- python3 -c pass` (the supervisor forks and waits) against `launch
  --torchrun-agent -- python3 -c pass`, which prepares the same environment and then exec's the program (the
  entry point as it was before the supervisor), medians over --reps, interleaved; and the time from starting the
  entry point to the program's first line, both ways.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_LINE = "import time; print(time.time(), flush=True)"


def env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SLURMGEN", "MASTER_", "RANK"))}
    return keep | {
        "PYTHONPATH": str(ROOT),
        "SLURM_JOB_ID": "7",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_JOB_NODELIST": "localhost",
        "MASTER_PORT": "29500",
        "SLURMGEN_PREEMPT_SIGNAL": "USR1",
    }


def launch(*flags: str, code: str = "pass") -> list[str]:
    return [sys.executable, "-m", "slurmgen.task", *flags, "--", sys.executable, "-c", code]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        line = next(ln for ln in handle if ln.startswith("VmRSS:"))
    return int(line.split()[1])


def measure_rss() -> tuple[int, int]:
    proc = subprocess.Popen(launch(code="import time; print(1, flush=True); time.sleep(3)"), env=env(),
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    sizes = rss_kib(proc.pid), rss_kib(int(children[0]))
    proc.wait()
    return sizes


def wall(argv: list[str]) -> tuple[float, float]:
    """(seconds to exit, seconds to the program's first line)."""
    started = time.time()
    done = subprocess.run(argv, env=env(), capture_output=True, text=True, check=True)
    ended = time.time()
    return ended - started, float(done.stdout.split()[0]) - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=20)
    reps = parser.parse_args().reps
    supervisor_rss, program_rss = measure_rss()
    print(f"RSS: supervisor {supervisor_rss / 1024:.1f} MiB, a bare python3 -c program {program_rss / 1024:.1f} MiB")
    runs: dict[str, list[tuple[float, float]]] = {"supervised": [], "exec": []}
    for _ in range(reps):
        runs["supervised"].append(wall(launch(code=FIRST_LINE)))
        runs["exec"].append(wall(launch("--torchrun-agent", code=FIRST_LINE)))
    for name, values in runs.items():
        total = statistics.median(v[0] for v in values) * 1000
        first = statistics.median(v[1] for v in values) * 1000
        print(f"{name:>10}: {total:6.1f} ms to exit, {first:6.1f} ms to the program's first line (median of {reps})")
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
