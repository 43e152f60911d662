"""What each in-job package costs at import over a bare interpreter: slurmgen.runtime (the user's program),
slurmgen.task (every task's entry point) and slurmgen.batch (the batch shell's helper).

    python bench/runtime_import.py [--runs 30]

Each row is the median wall time of fresh interpreters (subprocess start to exit), so Python's own startup
is in every row and the "over bare" column is what slurmgen adds. `-X importtime` gives the import's own
cumulative time as Python measures it, without process start-up noise. Goal: `import slurmgen.runtime` under
10 ms over bare; the entry points stay in the tens of milliseconds (no torch, no third-party package).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The batch helper's cheapest full run: its usage line and exit 2 (the real commands need a job's environment).
BATCH_USAGE = (
    "import runpy, sys; sys.argv = ['x']; sys.stderr = open('/dev/null', 'w')\n"
    "try: runpy.run_module('slurmgen.batch', run_name='__main__')\nexcept SystemExit: pass"
)


def wall(argv: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def importtime(module: str, runs: int, env: dict[str, str]) -> float:
    """Median cumulative microseconds Python reports for importing ``module`` (and what it pulls in)."""
    values = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        found = re.search(rf"\|\s*(\d+)\s*\|\s*{re.escape(module)}\s*$", done.stderr, re.MULTILINE)
        values.append(int(found.group(1)) if found else 0)
    return statistics.median(values) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    # An installed package has its .pyc files; a checkout run with PYTHONDONTWRITEBYTECODE would compile the
    # sources on every import and measure the compiler instead.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "slurmgen")], env=env, check=True)
    py = sys.executable
    # Warm the page cache and any .pyc so the first rows are not penalised.
    wall([py, "-c", "import slurmgen.task.launch, slurmgen.task.prepare"], 3, env)
    rows = [
        ("bare interpreter", [py, "-c", "pass"]),
        ("import slurmgen.runtime", [py, "-c", "import slurmgen.runtime"]),
        (
            "import + expand_hostlist + get_distrib_size",
            [
                py,
                "-c",
                "from slurmgen.runtime import expand_hostlist, get_distrib_size;"
                "expand_hostlist('n[1-4]'); get_distrib_size({})",
            ],
        ),
        ("entry point: python -m slurmgen.task -- true", [py, "-m", "slurmgen.task", "--", "true"]),
        ("batch helper: python -m slurmgen.batch (usage)", [py, "-c", BATCH_USAGE]),
    ]
    bare = None
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs, {args.runs} runs each, median")
    print(f"{'what':48} {'wall ms':>9} {'over bare ms':>13}")
    for name, argv in rows:
        median = wall(argv, args.runs, env)
        bare = median if bare is None else bare
        print(f"{name:48} {median * 1e3:9.1f} {(median - bare) * 1e3:13.1f}")
    for module in ("slurmgen.runtime", "slurmgen.task.prepare", "slurmgen.task.launch", "slurmgen.batch.commands"):
        label = f"-X importtime {module} (cumulative)"
        print(f"{label:48} {importtime(module, args.runs, env) * 1e3:9.2f}")


if __name__ == "__main__":
    main()
