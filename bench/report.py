"""What `slurmgen report` costs, and what its recording costs a training step.

    python bench/report.py [--runs 1000] [--points 10000] [--steps 200000] [--before main]

1. The report of one job with --runs runs (each: start, first step, progress samples, two saves, a stop, a
   requeue; every tenth run also a crash restart), its history written to disk by run_history.append as the
   job writes it: read + report + JSON + table + HTML. Goal: under 1 s for 1,000 runs, and a CPU time that
   doubles with the runs (exponent 1, from the report at half the runs).
2. A sweep of --points points (one run each), every point's history on disk: read all + every report + the
   roll-up's JSON, as `slurmgen report SWEEP --json` makes it (each history read once, its points' reports
   without markers and advice: manage/goodput_files.sweep_report(detail=False), spread over this machine's CPUs
   by manage/fanout.py). Goal: under 2 s for 10,000 (the wall time; the CPU time, children included, beside it).
3. `Preemption.should_stop()` per step, one process (no process group), log directory and hang watchdog on (so
   the progress mark is written as in a job), with this tree's slurmgen and with --before's (`git archive` of
   that revision), interleaved, median of --reps: the sampled recording must not show in a step.

Prints one line per measure and a JSON summary last.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurmgen import run_history as rh  # noqa: E402
from slurmgen.progress_mark import node_dir_name  # noqa: E402

T0 = 1_790_000_000.0


def write_job(log_dir: str, runs: int) -> None:
    a, t = rh.append, T0
    for run in range(1, runs + 1):
        a(log_dir, "batch-shell", rh.RUN_START, run, t, nodes="n[1-4]", queue={"submit": t - 30, "start": t})
        a(log_dir, "rank0", rh.FIRST_STEP, run, t + 20, steps=1, step=run * 1000)
        for k in range(3):
            a(log_dir, "rank0", rh.PROGRESS, run, t + 60 + 60 * k, steps=60 * k, step_seconds=1.0)
        a(log_dir, "rank0", rh.SAVE, run, t + 200, seconds=10.0, blocking=10.0, cause="periodic", steps=180)
        if run % 10 == 0:
            a(log_dir, "task-1", rh.TASK_EXIT, run, t + 250, rank=1, exit_code=-9)
            a(log_dir, "batch-shell", rh.RESTART, run, t + 260, cause="crash", who="rank 1", steps_lost=40,
              reached_step=run * 1000 + 220)  # fmt: skip
            a(log_dir, "rank0", rh.FIRST_STEP, run, t + 280, steps=1, step=run * 1000 + 181)
        a(log_dir, "rank0", rh.STOP, run, t + 400, cause=rh.PREEMPTION, step_seconds=1.0)
        a(log_dir, "rank0", rh.SAVE, run, t + 412, seconds=10.0, cause=rh.PREEMPTION, steps=380)
        a(log_dir, "rank0", rh.REQUEUE, run, t + 413, cause=rh.PREEMPTION)
        a(log_dir, "batch-shell", rh.RUN_END, run, t + 420, exit_code=0, ended="requeued")
        t += 500


def timed(work: Callable[[], None]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call: on a shared machine the CPU time is the cost, the wall time the wait."""
    began, cpu = time.perf_counter(), _cpu()
    work()
    return time.perf_counter() - began, _cpu() - cpu


def _cpu() -> float:
    """This process's CPU time and its reaped children's (a sweep's report forks over the CPUs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def bench_job(runs: int) -> tuple[float, float]:
    from slurmgen.goodput import html, summary, text

    with tempfile.TemporaryDirectory() as tmp:
        write_job(tmp, runs)

        def work() -> None:
            r = summary.report("1", rh.read(tmp), T0 + 500 * runs)
            json.dumps(r.to_json())
            text.report_lines(r)
            html.job_page([r])

        return min((timed(work) for _ in range(3)), key=lambda pair: pair[1])


def bench_sweep(points: int) -> tuple[float, float]:
    from slurmgen.goodput import summary
    from slurmgen.queries import fanout
    from slurmgen.queries.goodput_files import slim

    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for p in range(points):
            d = os.path.join(tmp, f"job-1_{p}")
            write_job(d, 1)
            dirs.append(d)

        def reports(start: int, stop: int) -> list[tuple[int, summary.Report]]:
            with summary.gc_paused():
                return [(p, slim(summary.report(f"1_{p}", rh.read(dirs[p]), T0 + 500, detail=False), False))
                        for p in range(start, stop)]  # fmt: skip

        def work() -> None:  # as manage/goodput_files.sweep_report (over this machine's CPUs), then `report --json`
            json.dumps(summary.SweepReport("1", fanout.spread(len(dirs), reports)).to_json())

        # the wall time is what a user waits; the CPU time (children included) what the machine pays
        return min((timed(work) for _ in range(2)), key=lambda pair: pair[0])


STEP_LOOP = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from slurmgen.runtime import Preemption
pre = Preemption(path=os.path.join(sys.argv[2], "state.pt"))
n = int(sys.argv[3])
for _ in range(1000):
    pre.should_stop()
began = time.perf_counter()
for _ in range(n):
    pre.should_stop()
print((time.perf_counter() - began) / n * 1e9)
"""


def step_cost(tree: str, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SLURMGEN_LOG_DIR": tmp, "SLURMGEN_HANG_TIMEOUT": "300", "PYTHONPATH": tree}
        env.pop("SLURM_JOB_ID", None)
        try:
            out = subprocess.run([sys.executable, "-c", STEP_LOOP, tree, tmp, str(steps)], env=env, check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
        finally:  # the program's node directory (/dev/shm): a job's last task removes it, this loop has none
            for folder in glob.glob(node_dir_name(tmp, "*")):
                shutil.rmtree(folder, ignore_errors=True)
        return float(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--points", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=200000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--before", default="main", help="the revision whose should_stop() is the baseline")
    args = parser.parse_args()
    job, half = bench_job(args.runs), bench_job(args.runs // 2)
    grows = math.log2(job[1] / half[1]) if job[1] > 0 and half[1] > 0 else None
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (the wall time waits for the CPU beyond that)")
    print(f"report of a job with {args.runs} runs: {job[0]:.3f} s wall, {job[1]:.3f} s CPU (goal < 1 s); "
          f"{half[1]:.3f} s CPU at {args.runs // 2}: grows as runs^{grows if grows is None else round(grows, 2)}"
          " (goal 1: each run's events are read a fixed number of times)")  # fmt: skip
    sweep = bench_sweep(args.points)
    print(f"report of a sweep of {args.points} points: {sweep[0]:.3f} s wall, {sweep[1]:.3f} s CPU (goal < 2 s)")
    with tempfile.TemporaryDirectory() as before:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "slurmgen"], check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", before], input=archive, check=True)
        now_ns, before_ns = [], []
        for _ in range(args.reps):
            before_ns.append(step_cost(before, args.steps))
            now_ns.append(step_cost(str(ROOT), args.steps))
    b, n = statistics.median(before_ns), statistics.median(now_ns)
    print(f"should_stop() per step: {b:.0f} ns before ({args.before}), {n:.0f} ns now ({n - b:+.0f} ns)")
    print(json.dumps({"job_runs": args.runs, "job_seconds": round(job[0], 4), "job_cpu_seconds": round(job[1], 4),
                      "job_exponent": grows,
                      "sweep_points": args.points, "sweep_seconds": round(sweep[0], 4),
                      "sweep_cpu_seconds": round(sweep[1], 4), "should_stop_ns_before": round(b),
                      "should_stop_ns_now": round(n), "load": load}))  # fmt: skip


if __name__ == "__main__":
    main()
