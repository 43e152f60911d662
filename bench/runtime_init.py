"""Time to an initialised process group: init_distributed versus raw env:// init.

    python bench/runtime_init.py [--sizes 2 4 8] [--reps 3]

For each world size, N local processes (gloo on 127.0.0.1). Two measures:

- "start->ready": from the moment the parent starts them to the moment the slowest rank's group is ready,
  `import torch` included, as a job sees it (on 2 cores this is mostly torch imports competing for CPU);
- "go->ready": every rank first imports torch and reports; the parent then releases them all at once and
  measures until the slowest rank's group is ready. This isolates the init path itself from import skew.

Rows compare `raw` = torch.distributed.init_process_group("gloo", init_method="env://") with RANK/WORLD_SIZE/
MASTER_ADDR/MASTER_PORT set, and `slurmgen` = `from slurmgen.runtime import init_distributed;
init_distributed("gloo")` from SLURM_* variables (its import is inside the measured part). Goal: slurmgen
within 10% of raw. Medians over --reps, runs interleaved; the load average is printed, since on a shared
2-core machine 8 torch processes are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rank_main(mode: str, gated: bool) -> None:
    import torch.distributed as dist

    if gated:
        print("imported", flush=True)
        sys.stdin.readline()  # the parent releases every rank at once
    if mode == "raw":
        dist.init_process_group("gloo", init_method="env://")
    else:
        from slurmgen.runtime import init_distributed

        init_distributed("gloo")
    print(json.dumps({"ready": time.time()}), flush=True)
    dist.barrier()  # stay until everyone is in, then leave together
    dist.destroy_process_group()


def free_port(low: bool) -> int:
    """A free port: any (raw), or one below the ephemeral range (slurmgen refuses ephemeral ports)."""
    candidates = range(21000 + os.getpid() % 3000, 30000) if low else [0]
    for port in candidates:
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise RuntimeError("no free port")


def rank_envs(mode: str, world: int) -> list[dict[str, str]]:
    drop = ("SLURM", "MASTER_", "RANK", "WORLD_", "LOCAL_", "NCCL_", "GLOO_", "TORCHELASTIC")
    base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    base.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    if mode == "raw":
        port = str(free_port(low=False))
        return [
            {
                **base,
                "RANK": str(r),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(r),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
            }
            for r in range(world)
        ]
    port = str(free_port(low=True))
    return [
        {
            **base,
            "SLURM_JOB_ID": "1",
            "SLURM_PROCID": str(r),
            "SLURM_LOCALID": str(r),
            "SLURM_NTASKS": str(world),
            "SLURM_NODEID": "0",
            "SLURM_STEP_TASKS_PER_NODE": str(world),
            "SLURM_STEP_NODELIST": "localhost",
            "SLURMGEN_PORT": port,
            "SLURMGEN_PORT_RANGE": "1",
        }
        for r in range(world)
    ]


def one_run(mode: str, world: int, gated: bool) -> float:
    argv = [sys.executable, __file__, "--rank", mode, *(["--gated"] if gated else [])]
    started = time.time()
    procs = [
        subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for env in rank_envs(mode, world)
    ]
    if gated:
        for proc in procs:
            if proc.stdout is None or proc.stdout.readline().strip() != "imported":
                raise SystemExit(f"a {mode} rank failed before the gate")
        started = time.time()
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.write("go\n")
                proc.stdin.flush()
    ready: list[float] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode:
            raise SystemExit(f"a {mode} rank failed with {proc.returncode}")
        ready.append(float(json.loads(out.splitlines()[-1])["ready"]))
    return max(ready) - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rank", choices=["raw", "slurmgen"], help=argparse.SUPPRESS)
    parser.add_argument("--gated", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        rank_main(args.rank, args.gated)
        return
    # An installed package has its .pyc files; a checkout run with PYTHONDONTWRITEBYTECODE would compile the
    # sources in every rank and measure the compiler instead.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "slurmgen")], check=True)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at start, {os.cpu_count()} CPUs, medians of {args.reps} runs")
    print(
        f"{'ranks':>5} | {'start->ready raw s':>18} {'slurmgen s':>10} {'ratio':>5} | "
        f"{'go->ready raw ms':>16} {'slurmgen ms':>11} {'ratio':>5}"
    )
    for world in args.sizes:
        runs: dict[tuple[str, bool], list[float]] = {}
        for _ in range(args.reps):  # interleaved, so drifting load hits both alike
            for gated in (False, True):
                for mode in ("raw", "slurmgen"):
                    runs.setdefault((mode, gated), []).append(one_run(mode, world, gated))
        med = {key: statistics.median(values) for key, values in runs.items()}
        raw_s, ours_s = med["raw", False], med["slurmgen", False]
        raw_g, ours_g = med["raw", True], med["slurmgen", True]
        print(
            f"{world:5d} | {raw_s:18.2f} {ours_s:10.2f} {ours_s / raw_s:5.2f} | "
            f"{raw_g * 1e3:16.1f} {ours_g * 1e3:11.1f} {ours_g / raw_g:5.2f}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at end")


if __name__ == "__main__":
    main()
