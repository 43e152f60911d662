"""Sharded checkpoints of an FSDP2 model (parameters + AdamW state = --gib GiB over --ranks ranks, CPU, gloo),
against the floor and against today's path (gather the full state to rank 0, one file).

    python bench/sharded_save.py [--gib 1] [--ranks 4] [--runs 3] [--dir /tmp] [--only preempt|periodic]

(1) signal -> durable + requeue issued. Real rank processes (bench/sharded_worker.py through the runtime entry
    point) get SIGUSR1 each, as srun delivers --signal; the clock stops when the stand-in `scontrol` on PATH is
    called, after the save is durable. Sharded: every rank writes its shards, rank 0 commits the directory.
    Gathered: get_state_dict(full_state_dict=True, cpu_offload=True) to rank 0, which writes one file. Floor:
    --ranks processes write --gib/--ranks GiB each, with fsync, into one directory at once.
(2) periodic saves while training (a stand-in step: 20 ms of waiting as for a GPU, small matmuls, an
    all_reduce; a save every 250 steps, more than a save takes): how long save() holds the loop, synchronous
    against async_=True, and the loop time each save costs against the same loop without saves (an async save
    still competes for this machine's CPUs).
(3) peak RSS of rank 0 above its RSS at the stop, during the stop's save (from the runs of (1)).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "bench" / "sharded_worker.py"
SETTLE = 0.5  # seconds between the ranks being ready and the signal (the floor's data ages as long)
COOLDOWN = 3.0  # seconds after os.sync() before each measurement: this VM writes slower right after a big write

FLOOR = """
import os, sys, time
size, path, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
data = memoryview((os.urandom(1 << 20) * ((size >> 20) + 1))[:size])  # in memory before the clock starts
print("READY", flush=True)
while not os.path.exists(go):
    time.sleep(0.0005)
with open(path, "wb", buffering=0) as handle:
    written = 0
    while written < size:
        written += handle.write(data[written : written + (64 << 20)])
    os.fsync(handle.fileno())
print(time.time(), flush=True)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def floor(directory: Path, size: int, ranks: int) -> float:
    """`ranks` concurrent writers of size/ranks bytes each, fsync each, same directory: the time to the last."""
    go = directory / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FLOOR, str(size // ranks), str(directory / f"floor{r}.bin"), str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for r in range(ranks)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    time.sleep(SETTLE)
    started = time.time()
    go.touch()
    ends = [float(proc.communicate()[0]) for proc in procs]
    go.unlink()
    for r in range(ranks):
        (directory / f"floor{r}.bin").unlink()
    return max(ends) - started


def launch(directory: Path, ranks: int, args: list[str]) -> list[subprocess.Popen[bytes]]:
    bindir = directory / "bin"
    bindir.mkdir(exist_ok=True)
    # The clock stops at the requeue; rank 0's `show job` at the stop gets no answer (Slurm's view: unknown).
    stamp = directory / "requeued.at"
    (bindir / "scontrol").write_text(f'#!/bin/bash\n[ "$1" = requeue ] && date +%s.%N > "{stamp}"\nexit 0\n')
    (bindir / "scontrol").chmod(0o755)
    port = str(free_port())
    procs = []
    for rank in range(ranks):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "MASTER_", "RANK", "WORLD"))},
            "PATH": f"{bindir}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
            "PYTHONWARNINGS": "ignore",
            "OMP_NUM_THREADS": "1",  # ranks share this machine's few cores
            "SLURM_JOB_ID": "42",
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank),
            "SLURM_NTASKS": str(ranks),
            "SLURM_JOB_NODELIST": "localhost",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "SLURMGEN_PREEMPT_SIGNAL": "USR1",
            "SLURMGEN_STATE_DIR": str(directory / "state"),
            "SLURMGEN_SPEC_HASH": "bench",
            "SLURMGEN_MAX_REQUEUES": "5",
            "SLURMGEN_BARRIER_TIMEOUT": "300",
        }
        cmd = [sys.executable, "-m", "slurmgen.task", "--", sys.executable, str(WORKER), *args]
        with open(directory / f"rank{rank}.out", "wb") as out, open(directory / f"rank{rank}.err", "wb") as err:
            procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=err))
    return procs


def wait_ready(directory: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    for rank, proc in enumerate(procs):
        while b"READY" not in (directory / f"rank{rank}.out").read_bytes():
            if proc.poll() is not None:
                raise SystemExit((directory / f"rank{rank}.err").read_text()[-3000:])
            time.sleep(0.01)


def json_line(directory: Path, rank: int) -> dict[str, Any]:
    lines = [line for line in (directory / f"rank{rank}.out").read_text().splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit((directory / f"rank{rank}.err").read_text()[-3000:])
    return dict(json.loads(lines[-1]))


def preempt(directory: Path, ranks: int, gib: float, mode: str) -> dict[str, Any]:
    (directory / "requeued.at").unlink(missing_ok=True)
    procs = launch(directory, ranks, ["--gib", str(gib), "--mode", mode, "--action", "preempt"])
    wait_ready(directory, procs)
    time.sleep(SETTLE)
    sent = time.time()
    for proc in procs:
        os.kill(proc.pid, signal.SIGUSR1)
    codes = [proc.wait(timeout=900) for proc in procs]
    if codes != [0] * ranks:
        raise SystemExit(f"{mode}: exit codes {codes}\n{(directory / 'rank0.err').read_text()[-3000:]}")
    out = json_line(directory, 0)
    out["elapsed"] = float((directory / "requeued.at").read_text()) - sent
    shutil.rmtree(directory / "state")
    return out


def periodic(directory: Path, ranks: int, gib: float, how: str) -> dict[str, Any]:
    args = ["--gib", str(gib), "--action", "periodic", "--every", "250", "--saves", "3"]  # a save every ~6 s
    args += {"sync": [], "async": ["--async-save"], "none": ["--dry"]}[how]
    procs = launch(directory, ranks, args)
    codes = [proc.wait(timeout=1800) for proc in procs]
    if codes != [0] * ranks:
        raise SystemExit(f"periodic {how}: exit codes {codes}\n{(directory / 'rank0.err').read_text()[-3000:]}")
    out = json_line(directory, 0)
    shutil.rmtree(directory / "state", ignore_errors=True)
    return out


def settle() -> None:
    os.sync()
    time.sleep(COOLDOWN)


def row(label: str, values: list[float], unit: str = "s") -> str:
    shown = ", ".join(f"{v:.2f}" for v in values)
    return f"{label:58} {statistics.median(values):9.2f} {unit:3} {shown}"


def bench_preempt(directory: Path, args: argparse.Namespace) -> None:
    floors: list[float] = []
    results: dict[str, list[dict[str, Any]]] = {"sharded": [], "gathered": []}
    order = ["floor", "sharded", "gathered"]
    for run in range(args.runs):  # rotate the order, so drift on the machine hits every side alike
        for side in order[run % 3 :] + order[: run % 3]:
            settle()
            if side == "floor":
                floors.append(floor(directory, int(args.gib * 2**30), args.ranks))
            else:
                results[side].append(preempt(directory, args.ranks, args.gib, side))
    sharded = [r["elapsed"] for r in results["sharded"]]
    gathered = [r["elapsed"] for r in results["gathered"]]
    base = statistics.median(floors)
    print(f"(1) signal -> durable + requeue issued, {args.gib:g} GiB over {args.ranks} ranks")
    print(f"{'what':58} {'median':>9}     runs")
    print(row(f"floor: {args.ranks} writers of {args.gib / args.ranks:g} GiB + fsync, one directory", floors))
    print(row("sharded (every rank writes, rank 0 commits)", sharded))
    print(row("gathered: today's path (full state to rank 0, one file)", gathered))
    print(f"{'sharded / floor (goal <= 1.15)':58} {statistics.median(sharded) / base:9.2f}")
    # Within one run the two were measured a minute apart at most: less exposed to this VM's drift.
    paired = [s / f for s, f in zip(sharded, floors, strict=True)]
    print(row("sharded / floor, run by run", paired, ""))
    print(f"{'sharded / gathered (goal < 1)':58} {statistics.median(sharded) / statistics.median(gathered):9.2f}")
    size = statistics.median(r["bytes"] for r in results["sharded"]) / 2**30
    gathered_size = statistics.median(r["bytes"] for r in results["gathered"]) / 2**30
    print(f"bytes on disk: sharded {size:.3f} GiB, gathered {gathered_size:.3f} GiB")
    print("\n(3) peak RSS of rank 0 during the stop's save, above its RSS at the stop")
    for side in ("sharded", "gathered"):
        extra = [r["peak_rss_extra"] / 2**20 for r in results[side]]
        print(row(side, extra, "MiB"))
    print()


def bench_periodic(directory: Path, args: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, Any]]] = {"sync": [], "async": [], "none": []}
    for run in range(args.runs):
        for how in ("sync", "async", "none") if run % 2 == 0 else ("none", "async", "sync"):
            settle()
            runs[how].append(periodic(directory, args.ranks, args.gib, how))
    sync_blocked = [b for r in runs["sync"] for b in r["blocked_s"]]
    async_blocked = [b for r in runs["async"] for b in r["blocked_s"]]
    async_total = [d for r in runs["async"] for d in r["save_s"]]
    base = statistics.median(r["loop_s"] for r in runs["none"])
    saves = len(runs["sync"][0]["blocked_s"])
    lost_sync = [(r["loop_s"] - base) / saves for r in runs["sync"]]
    lost_async = [(r["loop_s"] - base) / saves for r in runs["async"]]
    print(f"(2) periodic saves while training, sharded, {args.gib:g} GiB over {args.ranks} ranks, {saves} per run")
    print(f"{'what':58} {'median':>9}     saves")
    print(row("synchronous save(): loop held (= the save)", sync_blocked))
    print(row("save(async_=True): loop held (stage to CPU)", async_blocked))
    print(row("save(async_=True): call to durable, in the background", async_total))
    held = statistics.median(async_blocked) / statistics.median(sync_blocked)
    print(f"{'held: async / sync (goal <= 0.15)':58} {held:9.2f}")
    print(row("loop time lost per save, synchronous (vs. no saves)", lost_sync))
    print(row("loop time lost per save, async (vs. no saves)", lost_async))
    print(f"{'lost: async / sync':58} {statistics.median(lost_async) / statistics.median(lost_sync):9.2f}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--only", choices=("preempt", "periodic"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="slurmgen-bench-") as tmp:
        if args.only != "periodic":
            bench_preempt(Path(tmp), args)
        if args.only != "preempt":
            bench_periodic(Path(tmp), args)
    print(f"{args.dir}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
