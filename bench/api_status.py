"""The Python API's costs: `import slurmgen` in a fresh interpreter, and the states of N jobs through one
`slurmgen.status(ids)` (one squeue) against one `Job(id).state()` per job (one scontrol each, the per-job polling
that loads slurmctld: submitit #1759).

    SLURM_CONF=/tmp/slurmgen-cluster/etc/slurm.conf python bench/api_status.py [--jobs 20] [--runs 5]

Needs a Slurm cluster (the test cluster: tests/cluster/up.sh). Submits N held jobs (they never take a node) and
cancels them at the end. Prints a table of medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import slurmgen


def fresh_import_ms(runs: int) -> tuple[float, float]:
    """Median milliseconds of `python -c pass` and of `python -c 'import slurmgen'`."""

    def best(code: str) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)

    return best("pass"), best("import slurmgen")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bare, imported = fresh_import_ms(args.runs)
    jobs: list[str] = []
    try:
        for _ in range(args.jobs):
            done = subprocess.run(["sbatch", "--parsable", "--hold", "--output=/dev/null", "--wrap=true"],
                                  capture_output=True, text=True, check=True)  # fmt: skip
            jobs.append(done.stdout.strip().split(";")[0])
        one, each = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            slurmgen.status(jobs)
            one.append(time.perf_counter() - start)
            start = time.perf_counter()
            for job in jobs:
                slurmgen.Job(job).state()
            each.append(time.perf_counter() - start)
    finally:
        if jobs:
            subprocess.run(["scancel", *jobs], check=False)
    rows = [
        ("python -c pass", "-", bare),
        ("python -c 'import slurmgen'", "-", imported),
        (f"slurmgen.status({args.jobs} ids)", "1", statistics.median(one) * 1000),
        (f"Job(id).state() x {args.jobs}", str(args.jobs), statistics.median(each) * 1000),
    ]
    print(f"{'what':<36} {'Slurm calls':>11} {'median ms':>10}")
    for what, calls, ms in rows:
        print(f"{what:<36} {calls:>11} {ms:>10.1f}")


if __name__ == "__main__":
    main()
