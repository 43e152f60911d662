"""Whole-process wall time of `slurmgen submit` against plain `sbatch` of the same rendered script, on a real
Slurm (the local test cluster: `sudo tests/cluster/up.sh; source /tmp/slurmgen-cluster/env.sh`), then a burst of
back-to-back submissions checked for lost or duplicated job ids in the journal.

    python bench/submit.py [--runs 21] [--burst 100] [--parallel 4]

Every job is submitted held (`sbatch: {hold: true}` in the spec, `#SBATCH --hold` in the script), so nothing runs
on the shared cluster, and every job this benchmark submitted is cancelled by id at the end.
Rows: sbatch alone; slurmgen submit warm (a render cache hit, the common case: resubmitting an unchanged spec);
slurmgen submit cold (SLURMGEN_NO_CACHE=1: validation and rendering every time); `python -c pass` for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SPEC = """\
name: sgbench
command: [python3, -c, "pass"]
time: "00:01:00"
nodes: 1
tasks_per_node: 1
preemption: false
output: logs
sbatch: {hold: true}   # never runs: the benchmark measures submission only
"""
CLUSTER_CONF = Path("/tmp/slurmgen-cluster/etc/slurm.conf")


def slurmgen_argv() -> list[str]:
    script = Path(sys.executable).parent / "slurmgen"  # the console script, as a user runs it
    return [str(script)] if script.exists() else [sys.executable, "-m", "slurmgen"]


class Bench:
    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work, self.env = work, env
        self.jobs: list[str] = []  # every job id submitted, for the cleanup

    def timed(self, argv: list[str], env: dict[str, str] | None = None, submits: bool = True) -> float:
        started = time.perf_counter()
        result = subprocess.run(argv, cwd=self.work, env=env or self.env, capture_output=True, text=True)
        took = time.perf_counter() - started
        if submits and result.stdout.strip():
            self.jobs.append(result.stdout.strip().split(";")[0])
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
        return took

    def cleanup(self) -> None:
        ids = [j for j in self.jobs if j.isdigit()]
        for i in range(0, len(ids), 200):
            subprocess.run(["scancel", *ids[i : i + 200]], env=self.env, capture_output=True, check=False)


def measure(bench: Bench, runs: int) -> dict[str, list[float]]:
    sg = slurmgen_argv()
    cold_env = {**bench.env, "SLURMGEN_NO_CACHE": "1"}
    rows: dict[str, list[float]] = {
        "sbatch --parsable job.sbatch": [],
        "slurmgen submit (warm)": [],
        "slurmgen submit (cold)": [],
        "python -c pass": [],
    }
    bench.timed([*sg, "submit", "job.yaml"])  # warm the render cache
    for _ in range(runs):  # interleaved, so drift on a shared machine hits every row alike
        rows["sbatch --parsable job.sbatch"].append(bench.timed(["sbatch", "--parsable", "job.sbatch"]))
        rows["slurmgen submit (warm)"].append(bench.timed([*sg, "submit", "job.yaml"]))
        rows["slurmgen submit (cold)"].append(bench.timed([*sg, "submit", "job.yaml"], env=cold_env))
        rows["python -c pass"].append(bench.timed([sys.executable, "-c", "pass"], submits=False))
    return rows


def burst(bench: Bench, count: int, parallel: int) -> str:
    """`count` submissions back to back (by `parallel` workers) into a fresh journal; check the ids."""
    home = bench.work / f"burst-{parallel}"
    env = {**bench.env, "SLURMGEN_HOME": str(home)}
    sg = slurmgen_argv()

    def one(_: int) -> str:
        result = subprocess.run([*sg, "submit", "job.yaml"], cwd=bench.work, env=env, capture_output=True, text=True)
        bench.jobs.append(result.stdout.strip())
        if result.returncode != 0:
            raise SystemExit(f"submission failed: {result.stderr.strip()}")
        return result.stdout.strip()

    started = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        printed = list(pool.map(one, range(count)))
    took = time.perf_counter() - started
    lines = (home / "journal.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    recorded = [e["job_id"] for e in entries if e["event"] == "submitted"]
    tokens = {e["token"] for e in entries}
    known = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--format=%i", f"--jobs={','.join(printed)}"],
        env=bench.env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    ok = len(recorded) == len(set(recorded)) == count and set(recorded) == set(printed) == set(known)
    ok = ok and len(tokens) == count and len(lines) == 2 * count
    return (
        f"{count} submissions, {parallel} at a time: {took:.1f} s ({took / count * 1000:.0f} ms each); journal "
        f"{len(lines)} lines, {len(recorded)} submitted ids, {len(set(recorded))} distinct, {len(tokens)} tokens; "
        f"printed {len(set(printed))} distinct ids; Slurm knows {len(set(known))}: {'OK' if ok else 'MISMATCH'}"
    )


def table(rows: dict[str, list[float]]) -> str:
    base = statistics.median(rows["sbatch --parsable job.sbatch"])
    out = [f"{'command':<30} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x sbatch':>9}"]
    for name, times in rows.items():
        med = statistics.median(times)
        out.append(
            f"{name:<30} {med * 1e3:>10.1f} {min(times) * 1e3:>8.1f} {max(times) * 1e3:>8.1f} {med / base:>9.2f}"
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=4, help="workers for a second, concurrent burst (0: none)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SLURM_")) or k == "SLURM_CONF"}
    # As an installed slurmgen runs: pip writes bytecode at install; without it every start compiles the modules.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if "SLURM_CONF" not in env and CLUSTER_CONF.exists():
        env["SLURM_CONF"] = str(CLUSTER_CONF)
    if shutil.which("sbatch") is None:
        raise SystemExit("sbatch not found: this benchmark needs a Slurm cluster (tests/cluster/up.sh)")
    work = Path(tempfile.mkdtemp(prefix="slurmgen-bench-", dir="/tmp"))
    bench = Bench(work, env)
    try:
        (work / "job.yaml").write_text(SPEC)
        subprocess.run([*slurmgen_argv(), "render", "job.yaml", "-o", "job.sbatch"], cwd=work, env=env,
                       capture_output=True, check=True)  # fmt: skip
        rows = measure(bench, args.runs)
        print(f"Whole-process wall time, {args.runs} runs each, interleaved; {os.cpu_count()} CPUs, shared")
        print(table(rows))
        print()
        print(burst(bench, args.burst, 1))
        if args.parallel > 1:
            print(burst(bench, args.burst, args.parallel))
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(f"cancelled the {len(bench.jobs)} held jobs this benchmark submitted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
