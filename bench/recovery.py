"""Recovery on the real test cluster, timed: a crashed rank's failure to its first resumed step, for the restart
inside the allocation, for the requeue path, against the floor (a fresh step start plus the checkpoint load); and
a hang to its stacks written.

    source /tmp/slurmgen-cluster/env.sh && python bench/recovery.py [--runs 1]

Each job is tests/runtime/own_checkpoint.py, 2 nodes x 2 ranks (gloo), saving every 20 steps.
- restart: rank 1 SIGKILLs itself after step 50; failure = its supervisor's task-exit event; resumed = the first
  `RESUMED ... at=T` line of the restarted step (after the checkpoint load, before its first step).
- requeue: the same with `recovery: false` and `requeue_on_failure`: Slurm requeues the job.
- floor: a job whose snapshot exists already: its run-start event (the batch shell's start) to `RESUMED`.
- hang: rank 1 sleeps forever at step 50 (hang_timeout 30 s): `HANGING ... at=T` to the stacks file written.
Goals: restart within 1.5x the floor; hang to stacks within hang_timeout + 10 s. Prints a table of medians.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slurmgen import run_history
from slurmgen.script.render import render
from slurmgen.spec.load import load_text

ROOT = Path(__file__).resolve().parent.parent
OWN = ROOT / "tests" / "runtime" / "own_checkpoint.py"
HANG_TIMEOUT = 30


def sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def submit(tmp: Path, name: str, extra: list[str], recovery: str, preemption: str = "{}") -> str:
    command = [sys.executable, str(OWN), "--steps", "100", "--step-time", "0.05", "--save-every", "20",
               "--snapshot", str(tmp / f"{name}.pt"), *extra]  # fmt: skip
    text = (
        f"name: {name}\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\n"
        f"python: {sys.executable}\noutput: {tmp}/logs\ndistributed: {{backend: gloo, timeout: 120}}\n"
        f"recovery: {recovery}\npreemption: {preemption}\n"
    )
    script = tmp / f"{name}.sbatch"
    script.write_text(render(load_text(text, "bench.yaml").spec))
    (tmp / "logs").mkdir(exist_ok=True)
    return sh("sbatch", "--parsable", str(script))


def wait_done(job: str, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = sh("scontrol", "show", "job", job)
        if re.search(r"JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT)", state) and "Restarts=" in state:
            return
        time.sleep(0.5)
    raise SystemExit(f"job {job} did not end within {timeout:g} s")


def stamps(tmp: Path, name: str, job: str, what: str) -> list[float]:
    text = "".join(p.read_text(errors="replace") for p in sorted((tmp / "logs" / f"{name}-{job}").glob("rank-*.log")))
    return sorted(float(t) for t in re.findall(rf"{what} .*?at=(\d+\.\d+)", text))


def events(tmp: Path, name: str, job: str, kind: str) -> list[dict[str, object]]:
    return [e for e in run_history.read(str(tmp / "logs" / f"{name}-{job}")) if e.get("event") == kind]


def crash(tmp: Path, name: str, recovery: str, preemption: str) -> float:
    job = submit(tmp, name, ["--die-rank", "1", "--die-at", "50", "--die-once", str(tmp / f"{name}.died")],
                 recovery, preemption)  # fmt: skip
    wait_done(job)
    failed = min(float(e["time"]) for e in events(tmp, name, job, run_history.TASK_EXIT))  # type: ignore[arg-type]
    resumed = [t for t in stamps(tmp, name, job, "RESUMED") if t > failed]
    return resumed[0] - failed


def floor(tmp: Path) -> float:
    shutil.copy(tmp / "restart.pt", tmp / "floor.pt")
    job = submit(tmp, "floor", [], "false")
    wait_done(job)
    start = min(float(e["time"]) for e in events(tmp, "floor", job, run_history.RUN_START))  # type: ignore[arg-type]
    return stamps(tmp, "floor", job, "RESUMED")[0] - start


def hang(tmp: Path) -> float:
    job = submit(tmp, "hang", ["--hang-rank", "1", "--hang-at", "50", "--hang-once", str(tmp / "hang.once")],
                 f"{{hang_timeout: {HANG_TIMEOUT}}}")  # fmt: skip
    wait_done(job)
    hung = stamps(tmp, "hang", job, "HANGING")[0]
    stacks = tmp / "logs" / f"hang-{job}" / "hang" / "rank-1.stacks"
    return stacks.stat().st_mtime - hung


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"restart inside the allocation": [], "requeue": [], "floor": [], "hang": []}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-recovery-", dir="/tmp") as name:
            tmp = Path(name)
            rows["restart inside the allocation"].append(crash(tmp, "restart", "{}", "{}"))
            rows["requeue"].append(crash(tmp, "requeue", "false", "{requeue_on_failure: true}"))
            rows["floor"].append(floor(tmp))
            rows["hang"].append(hang(tmp))
    floor_s = statistics.median(rows["floor"])
    print(f"{'path':<32}{'median s':>10}  goal")
    for label, values in rows.items():
        value = statistics.median(values)
        goal = {"restart inside the allocation": f"<= {1.5 * floor_s:.1f} (1.5x floor)", "floor": "",
                "requeue": "", "hang": f"<= {HANG_TIMEOUT + 10} (hang_timeout + 10 s)"}[label]  # fmt: skip
        print(f"{label:<32}{value:>10.1f}  {goal}")


if __name__ == "__main__":
    main()
