"""Signal to "state durable and requeue issued", for a 1 GiB resume state, against the floor: writing the same
number of bytes with fsync outside slurmgen, on the same disk, in the same run.

    python bench/preempt_save.py [--gib 1] [--runs 3] [--dir /tmp]

slurmgen's side is a real process running a training-loop stand-in (tests/preempt/worker.py) through the
runtime entry point, with Preemption() installed; the bench sends it SIGUSR1 and stops the clock when the
requeue is issued (a stand-in `scontrol` on PATH records the moment it is called; the real one only adds its
own latency). That span holds: the handler, the stop agreement at the next step boundary, torch.save of the
state to a temporary file, fsync, rename, directory fsync, and the requeue call.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "preempt" / "worker.py"
SETTLE = 0.5  # seconds between the state being in memory and the signal (both sides)
# This VM writes a GiB right after another GiB up to 3x slower (page reclaim, host writeback); a pause with the
# previous file gone lets each measurement start from the same state.
COOLDOWN = 3.0


FLOOR = """
import os, sys, time
size, path, age = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
data = memoryview(b"\\x5a" * size)  # in memory before the clock starts, like the state in the trainer
time.sleep(age)  # as old as the trainer's state when the signal comes: on this VM, aged pages write slower
start = time.perf_counter()
with open(path, "wb", buffering=0) as handle:
    written = 0
    while written < size:
        written += handle.write(data[written : written + (64 << 20)])
    os.fsync(handle.fileno())
print(time.perf_counter() - start)
"""


def floor(directory: Path, size: int) -> float:
    """Write `size` bytes to a new file and fsync them, in a fresh process: what any save must at least cost."""
    path = directory / "floor.bin"
    out = subprocess.run(
        [sys.executable, "-c", FLOOR, str(size), str(path), str(SETTLE)], capture_output=True, text=True, check=True
    )
    path.unlink()
    return float(out.stdout)


def slurmgen(directory: Path, gib: float) -> tuple[float, int]:
    bindir = directory / "bin"
    bindir.mkdir(exist_ok=True)
    stamp = directory / "requeued.at"
    fake = bindir / "scontrol"
    # Only the requeue counts: rank 0 also asks `scontrol show job` at the stop, before it saves.
    fake.write_text(f'#!/bin/bash\ncase "$1" in requeue) date +%s.%N > "{stamp}" ;; esac\n')
    fake.chmod(0o755)
    stamp.unlink(missing_ok=True)
    state = directory / "state"
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "42",
        "SLURMGEN_PREEMPT_SIGNAL": "USR1",
        "SLURMGEN_STATE_DIR": str(state),
        "SLURMGEN_MAX_REQUEUES": "5",
        "SLURMGEN_SPEC_HASH": "bench",
    }
    cmd = [
        sys.executable,
        "-m",
        "slurmgen.task",
        "--",
        sys.executable,
        str(WORKER),
        "--state-mb",
        str(gib * 1024),
        "--step-time",
        "0.001",
        "--static-state",
    ]
    with open(directory / "worker.out", "wb") as out, open(directory / "worker.err", "wb") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
    while b"READY" not in (directory / "worker.out").read_bytes():
        if proc.poll() is not None:
            raise SystemExit((directory / "worker.err").read_text())
        time.sleep(0.01)
    time.sleep(SETTLE)  # let it settle into its loop
    sent = time.time()
    os.kill(proc.pid, signal.SIGUSR1)
    proc.wait(timeout=600)
    elapsed = float(stamp.read_text()) - sent
    size = (state / "42.state").stat().st_size
    (state / "42.state").unlink()
    return elapsed, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    ours, floors = [], []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="slurmgen-bench-") as tmp:
        directory = Path(tmp)
        size = int(args.gib * 2**30)
        for run in range(args.runs):  # alternate the order, so drift on the machine hits both sides alike
            for side in ("floor", "ours") if run % 2 else ("ours", "floor"):
                os.sync()
                time.sleep(COOLDOWN)
                if side == "floor":
                    floors.append(floor(directory, size))
                else:
                    elapsed, size = slurmgen(directory, args.gib)
                    ours.append(elapsed)
    mine, base = statistics.median(ours), statistics.median(floors)
    print(f"{'what':46} {'median s':>9}   runs")
    print(f"{'write + fsync of the same bytes (floor)':46} {base:9.2f}   {', '.join(f'{x:.2f}' for x in floors)}")
    print(f"{'slurmgen: signal -> durable + requeue issued':46} {mine:9.2f}   {', '.join(f'{x:.2f}' for x in ours)}")
    print(f"{'ratio (goal <= 1.10)':46} {mine / base:9.2f}")
    print(f"\nstate {size / 2**30:.2f} GiB in {args.dir}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
