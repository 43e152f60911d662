"""Sweeps at scale, without a cluster: stand-in Slurm commands on PATH that record every call.

    python bench/sweep.py [--points 1000,10000] [--submitit /path/to/venv/bin/python]

Rows:
- `slurmgen submit` of a grid sweep of N points (the whole CLI process, as a user runs it): wall time and the
  number of sbatch calls (one per array; MaxArraySize 1001 from the stand-in `scontrol show config`);
- `slurmgen status SWEEP` of a 10,000-point sweep, answered by one `squeue --states=all --Format=...` that
  prints one row per task: wall time and the number of Slurm calls;
- the same for submitit's `map_array` (submission) and its job states (sacct), where a Python with submitit is
  given (`--submitit`; never a dependency of slurmgen or its tests: install it into a throwaway venv).
The stand-ins are bash scripts, so the times are slurmgen's (or submitit's) own plus a few ms per call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_ARRAY_SIZE = 1001

STANDINS = {
    # sbatch: records its argv, answers with the next job id (--parsable: the id alone, as sbatch(1) says).
    "sbatch": """#!/bin/bash
printf '%s\\n' "sbatch $*" >>"$BENCH/calls.log"
id=$(($(wc -l <"$BENCH/calls.log") + 1000))
case " $* " in *" --parsable "*) echo "$id" ;; *) echo "Submitted batch job $id" ;; esac
""",
    "scontrol": """#!/bin/bash
printf '%s\\n' "scontrol $*" >>"$BENCH/calls.log"
case "$*" in
*"show config"*) printf 'SLURM_VERSION = 22.05.8\\nKillWait = 5 sec\\nMaxArraySize = %s\\n' "$BENCH_MAX" ;;
esac
""",
    "squeue": """#!/bin/bash
printf '%s\\n' "squeue $*" >>"$BENCH/calls.log"
case "$*" in *"--Format="*) cat "$BENCH/squeue.out" ;; esac
""",
    "sacct": """#!/bin/bash
printf '%s\\n' "sacct $*" >>"$BENCH/calls.log"
cat "$BENCH/sacct.out"
""",
}

SPEC = """\
name: bench-sweep
command: [python3, train.py, "--a={{a}}", "--b={{b}}"]
time: "00:10:00"
preemption: false
output: logs
sweep:
  grid: {{a: {a}, b: {b}}}
  max_parallel: 50
"""


def setup(work: Path) -> dict[str, str]:
    bin_dir = work / "bin"
    bin_dir.mkdir()
    for name, text in STANDINS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    return env | {"PATH": f"{bin_dir}:{env['PATH']}", "BENCH": str(work), "BENCH_MAX": str(MAX_ARRAY_SIZE),
                  "SLURMGEN_HOME": str(work / ".slurmgen")}  # fmt: skip


def calls(work: Path, command: str) -> int:
    log = work / "calls.log"
    return sum(1 for line in log.read_text().splitlines() if line.startswith(command)) if log.exists() else 0


def run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {result.stderr[-2000:]}")
    return took, result.stdout.strip()


def squeue_output(arrays: list[int], per_array: int) -> str:
    """What `squeue --states=all --Format=...` (slurmgen.slurm.array_queue) prints for these arrays: one row per
    task, a mix of finished, running and failed tasks, as on the test cluster (tests/sweep/test_sweep_cluster.py
    reads the real thing)."""
    states = [("COMPLETED", "0"), ("RUNNING", "0"), ("FAILED", "3"), ("COMPLETED", "0")]
    rows = []
    for array in arrays:
        for task in range(per_array):
            state, code = states[task % 4]
            rows.append(f"{array}_{task}|{state}|None|0|{code}|12:34|\n")
    return "".join(rows)


def grid(points: int) -> tuple[list[int], list[int]]:
    b = 10
    return list(range(points // b)), list(range(b))


def bench_slurmgen(points: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="sg-sweep-") as tmp:
        work = Path(tmp)
        env = setup(work)
        a, b = grid(points)
        (work / "sweep.yaml").write_text(SPEC.format(a=a, b=b))
        took, _ = run([sys.executable, "-m", "slurmgen", "submit", "sweep.yaml"], env, work)
        return took, calls(work, "sbatch")


def bench_status(points: int) -> tuple[float, int, int]:
    with tempfile.TemporaryDirectory(prefix="sg-sweep-") as tmp:
        work = Path(tmp)
        env = setup(work)
        a, b = grid(points)
        (work / "sweep.yaml").write_text(SPEC.format(a=a, b=b))
        _, sweep = run([sys.executable, "-m", "slurmgen", "submit", "sweep.yaml"], env, work)
        arrays = list(range(1001, 1001 + calls(work, "sbatch")))
        per_array = -(-points // len(arrays))
        (work / "squeue.out").write_text(squeue_output(arrays, per_array))
        before = len((work / "calls.log").read_text().splitlines())
        took, table = run([sys.executable, "-m", "slurmgen", "status", sweep], env, work)
        slurm_calls = len((work / "calls.log").read_text().splitlines()) - before
        return took, slurm_calls, len(table.splitlines()) - 2


SUBMITIT_SUBMIT = """
import sys, time, submitit
points, folder = int(sys.argv[1]), sys.argv[2]
ex = submitit.SlurmExecutor(folder=folder)
ex.update_parameters(time=10, array_parallelism=50)
t0 = time.perf_counter()
jobs = ex.map_array(abs, range(points))
took = time.perf_counter() - t0
open(folder + "/ids", "w").write("\\n".join(j.job_id for j in jobs))
t0 = time.perf_counter()
states = [j.state for j in jobs]
print(took, time.perf_counter() - t0, len(states))
"""


def bench_submitit(python: str, points: int) -> tuple[float, int, float, int]:
    with tempfile.TemporaryDirectory(prefix="sg-submitit-") as tmp:
        work = Path(tmp)
        env = setup(work)
        first = 1001  # the stand-in's first id
        (work / "sacct.out").write_text(
            "JobID|State|NodeList\n" + "".join(f"{first}_{i}|COMPLETED|node1\n" for i in range(points))
        )
        _, out = run([python, "-c", SUBMITIT_SUBMIT, str(points), str(work / "jobs")], env, work)
        submit, status, _ = out.split()
        return float(submit), calls(work, "sbatch"), float(status), calls(work, "sacct")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", default="1000,10000")
    parser.add_argument("--submitit", default="", help="a Python that can import submitit")
    args = parser.parse_args()
    sizes = [int(p) for p in args.points.split(",")]
    rows = [("what", "points", "seconds", "Slurm calls")]
    for n in sizes:
        took, sbatches = bench_slurmgen(n)
        rows.append(("slurmgen submit (whole CLI)", str(n), f"{took:.2f}", f"{sbatches} sbatch"))
    took, slurm_calls, shown = bench_status(max(sizes))
    rows.append((f"slurmgen status ({shown} rows, whole CLI)", str(max(sizes)), f"{took:.2f}",
                 f"{slurm_calls} squeue"))  # fmt: skip
    if args.submitit:
        for n in sizes:
            submit, sbatches, status, saccts = bench_submitit(args.submitit, n)
            rows.append(("submitit map_array (in-process)", str(n), f"{submit:.2f}", f"{sbatches} sbatch"))
            rows.append(("submitit job.state for all jobs", str(n), f"{status:.2f}", f"{saccts} sacct"))
    else:
        rows.append(("submitit map_array", "-", "not measured", "give --submitit PYTHON"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(json.dumps({"max_array_size": MAX_ARRAY_SIZE}))


if __name__ == "__main__":
    main()
