"""A real scheduler preemption, timed: from the high-priority job's submission to (a) the preempted job's state
being durable and (b) the high-priority job running, per site configuration, against Slurm's own floor: the same
preemption of a plain `srun sleep` job, which dies on its first SIGTERM and saves nothing.

    sudo python bench/preempt_real.py [--runs 3] [--slurm 22.05]

Needs root and the test cluster (tests/cluster/up.sh starts it, with the preemption partitions low-requeue,
low-requeue-grace, low-cancel, low-cancel-grace and high over the same nodes; KillWait 5 s, GraceTime 10 s). The
victim is jobs/train_tiny.py, 2 nodes x 2 ranks (gloo), in the low partition; the preemptor needs both nodes.
(a) is the time of the stop's save in the job's run history; (b) is when scontrol first shows the preemptor
RUNNING (polled every 0.1 s). Goal: (b) within 1 s of the floor plus the save, wherever the job is told (the user
signal, or a grace-time SIGTERM). Prints a table of medians.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slurmgen import run_history
from slurmgen.script.render import render
from slurmgen.spec.load import load_text

ROOT = Path(__file__).resolve().parent.parent
UP, SIGNAL = ROOT / "tests" / "cluster" / "up.sh", ROOT / "tests" / "cluster" / "preempt-signal.sh"
TRAIN = ROOT / "jobs" / "train_tiny.py"
NODES = "node1,node2"
CONFIGS = [  # name, partition, user signal at preemption
    ("REQUEUE, no grace", "low-requeue", False),
    ("REQUEUE, grace, no user signal", "low-requeue-grace", False),
    ("REQUEUE, grace, user signal", "low-requeue-grace", True),
    ("CANCEL, no grace", "low-cancel", False),
    ("CANCEL, grace, user signal", "low-cancel-grace", True),
]


def cluster(version: str) -> dict[str, str]:
    subprocess.run(["bash", str(UP), "--slurm", version], check=True, capture_output=True, timeout=900)
    info = subprocess.run(["bash", str(UP), "--slurm", version, "--info"], capture_output=True, text=True, check=True)
    return dict(line.split("=", 1) for line in info.stdout.splitlines() if "=" in line)


class Slurm:
    def __init__(self, info: dict[str, str]) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
        self.env["SLURM_CONF"] = info["SLURM_CONF"]
        if info.get("PATH_PREPEND"):
            self.env["PATH"] = f"{info['PATH_PREPEND']}:{self.env['PATH']}"

    def run(self, *argv: str) -> str:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, check=True, timeout=60).stdout

    def sbatch(self, *argv: str) -> str:
        return self.run("sbatch", "--parsable", *argv).strip().split(";")[0]

    def state(self, job: str) -> str:
        out = self.run("scontrol", "-o", "show", "job", job)
        found = re.search(r"JobState=(\S+)", out)
        return found[1] if found else "?"

    def wait_running(self, job: str, timeout: float = 180) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.state(job) in ("RUNNING", "COMPLETED"):
                return time.time()
            time.sleep(0.1)
        raise TimeoutError(f"job {job} did not start")


@contextmanager
def preemption_lock(base: str) -> Iterator[None]:
    """The lock the test suite's preemption tests take: one preemption experiment on a cluster at a time."""
    with open(f"{base}.preempt.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def preempt(slurm: Slurm, partition: str) -> float:
    """High job submitted at t; returns seconds until it ran."""
    t0 = time.time()
    high = slurm.sbatch("-p", "high", f"--nodelist={NODES}", "-N", "2", "--ntasks-per-node=2", "-o", "/dev/null",
                        "--wrap", "sleep 1")  # fmt: skip
    return slurm.wait_running(high) - t0


def floor(slurm: Slurm, partition: str, tmp: Path) -> float:
    victim = slurm.sbatch("-p", partition, f"--nodelist={NODES}", "-N", "2", "--ntasks-per-node=2", "--requeue",
                          "--signal=B:USR1@60", "-t", "10", "-o", str(tmp / "floor-%j.out"),
                          "--wrap", "srun sleep 600")  # fmt: skip
    slurm.wait_running(victim)
    time.sleep(2)
    took = preempt(slurm, partition)
    slurm.run("scancel", victim)
    return took


def slurmgen_job(slurm: Slurm, partition: str, tmp: Path, n: int) -> tuple[float, float, float]:
    """(seconds to durable, seconds until the preemptor ran, the save's own seconds)."""
    name = f"bench{n}"
    spec = load_text(
        f"name: {name}\ncommand: [{sys.executable!r}, {str(TRAIN)!r}, '--steps', '100000', '--step-time', '0.02']\n"
        f"time: '00:10:00'\nnodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\npython: {sys.executable!r}\n"
        f"output: {tmp}/logs\npartition: {partition}\ndistributed: {{backend: gloo, timeout: 60}}\n",
        "bench.yaml",
    ).spec
    script = tmp / f"{name}.sbatch"
    script.write_text(render(spec))
    (tmp / "logs").mkdir(exist_ok=True)
    job = slurm.sbatch(f"--nodelist={NODES}", str(script))
    log_dir = tmp / "logs" / f"{name}-{job}"
    deadline = time.monotonic() + 180
    while len(re.findall(r"start at step 0", "".join(p.read_text() for p in log_dir.glob("*.log")))) < 4:
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job} never stepped")
        time.sleep(0.2)
    time.sleep(2)
    t0 = time.time()
    ran = preempt(slurm, partition) + t0
    durable = None
    deadline = time.monotonic() + 60
    while durable is None and time.monotonic() < deadline:
        saves = [e for e in run_history.read(str(log_dir)) if e["event"] == run_history.SAVE and e["run"] == 1]
        stop = [e for e in saves if e.get("cause") != "periodic"]
        durable = stop[0] if stop else None
        time.sleep(0.2)
    slurm.run("scancel", job)
    if durable is None:
        raise RuntimeError(f"job {job}: no stop save recorded")
    return float(durable["time"]) - t0, ran - t0, float(durable["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slurm", default="22.05")
    args = parser.parse_args()
    info = cluster(args.slurm)
    slurm = Slurm(info)
    rows = []
    with preemption_lock(info["BASE"]), tempfile.TemporaryDirectory(dir="/tmp") as tmpdir:
        tmp = Path(tmpdir)
        os.chmod(tmp, 0o755)  # noqa: S103 - the jobs run as root too, but slurmstepd opens the logs here
        try:
            for n, (label, partition, user_signal) in enumerate(CONFIGS):
                subprocess.run(["bash", str(SIGNAL), "--slurm", args.slurm, "on" if user_signal else "off"],
                               check=True, capture_output=True, timeout=120)  # fmt: skip
                floors = [floor(slurm, partition, tmp) for _ in range(args.runs)]
                ours = [slurmgen_job(slurm, partition, tmp, n * 10 + i) for i in range(args.runs)]
                rows.append((label, floors, ours))
        finally:
            subprocess.run(["bash", str(SIGNAL), "--slurm", args.slurm, "off"], capture_output=True, timeout=120)
    med = statistics.median
    print(f"Slurm {args.slurm}, {args.runs} runs each, medians in seconds (GraceTime {info['GRACE_TIME']} s, "
          f"KillWait {info['KILL_WAIT']} s)\n")  # fmt: skip
    print(
        f"{'configuration':34} {'floor (b)':>9} {'durable (a)':>11} {'high runs (b)':>13} {'save':>6} {'(b)-floor':>9}"
    )
    for label, floors, ours in rows:
        a, b, save = med(o[0] for o in ours), med(o[1] for o in ours), med(o[2] for o in ours)
        print(f"{label:34} {med(floors):9.2f} {a:11.2f} {b:13.2f} {save:6.2f} {b - med(floors):9.2f}")


if __name__ == "__main__":
    main()
