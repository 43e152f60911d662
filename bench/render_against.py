"""Cold `slurmgen render` of this tree against another checkout of slurmgen (an earlier commit), interleaved: run
A, run B, run A, ... so that the machine's load falls on both alike. Prints the medians and their ratio.

    git worktree add --detach /tmp/old <commit>
    python bench/render_against.py /tmp/old [--runs 31]

Both run with this environment's Python and libraries; each tree is put first on PYTHONPATH, so each imports its
own slurmgen (and its own templates). "Cold": a new process every run, no cache of rendered scripts.
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
SPEC = "jobs/cpu-debug.yaml"  # the 2-node example, in each tree


def once(tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "slurmgen", "render", SPEC], cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other checkout (e.g. a worktree of an earlier commit)")
    parser.add_argument("--runs", type=int, default=31)
    args = parser.parse_args()
    trees = {"this tree": ROOT, str(args.other): args.other.resolve()}
    times: dict[str, list[float]] = {name: [] for name in trees}
    for tree in trees.values():
        once(tree)  # warm the page cache for both, then measure
    for _ in range(args.runs):
        for name, tree in trees.items():
            times[name].append(once(tree))
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians[str(args.other)]
    print(f"{'tree':<40} {'median ms':>10} {'min ms':>8} {'ratio':>6}")
    for name, t in times.items():
        print(f"{name:<40} {medians[name] * 1000:>10.0f} {min(t) * 1000:>8.0f} {medians[name] / base:>6.2f}")


if __name__ == "__main__":
    main()
