"""Time from process start to an initialised process group: init_distributed versus raw env:// init.

    python bench/runtime_init.py [--sizes 2 4 8] [--reps 3]

For each world size, N local processes start at once (gloo on 127.0.0.1); each prints when its process
group is ready and how long the init call itself took. "ready" is the slowest rank's moment minus the
moment the parent started them (import torch included, as a job sees it); "init" is the median over ranks of
the init call alone. Rows: `raw` = torch.distributed.init_process_group("gloo", init_method="env://") with
RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set; `slurmgen` = init_distributed("gloo") from SLURM_* variables.
Goal: slurmgen within 10% of raw. Medians over --reps; the machine's load is printed, since a shared
2-core box makes torch imports of 8 processes noisy.
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


def rank_main(mode: str) -> None:
    import torch.distributed as dist

    start = time.perf_counter()
    if mode == "raw":
        dist.init_process_group("gloo", init_method="env://")
    else:
        from slurmgen.runtime import init_distributed

        init_distributed("gloo")
    init = time.perf_counter() - start
    print(json.dumps({"ready": time.time(), "init": init}), flush=True)
    dist.barrier()  # stay in the group until everyone is in, then leave together
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def low_free_port() -> int:
    for port in range(21000 + os.getpid() % 3000, 30000):
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def one_run(mode: str, world: int) -> tuple[float, float]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "MASTER_", "RANK", "WORLD_"))}
    base.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    if mode == "raw":
        port = free_port()
        envs = [
            {
                **base,
                "RANK": str(r),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(r),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            }
            for r in range(world)
        ]
    else:
        port = low_free_port()
        envs = [
            {
                **base,
                "SLURM_JOB_ID": "1",
                "SLURM_PROCID": str(r),
                "SLURM_LOCALID": str(r),
                "SLURM_NTASKS": str(world),
                "SLURM_NODEID": "0",
                "SLURM_STEP_TASKS_PER_NODE": str(world),
                "SLURM_STEP_NODELIST": "localhost",
                "SLURMGEN_PORT": str(port),
                "SLURMGEN_PORT_RANGE": "1",
            }
            for r in range(world)
        ]
    started = time.time()
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--rank", mode], env=env, stdout=subprocess.PIPE, text=True
        )
        for env in envs
    ]
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode:
            raise SystemExit(f"{mode} rank failed with {proc.returncode}")
        reports.append(json.loads(out.splitlines()[-1]))
    return max(r["ready"] for r in reports) - started, statistics.median(r["init"] for r in reports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rank", choices=["raw", "slurmgen"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        rank_main(args.rank)
        return
    print(
        f"load average {os.getloadavg()[0]:.2f} (1 min) at start, {os.cpu_count()} CPUs, "
        f"medians of {args.reps} runs"
    )
    print(
        f"{'ranks':>5} {'raw ready s':>12} {'slurmgen ready s':>17} {'ratio':>6} "
        f"{'raw init ms':>12} {'slurmgen init ms':>17} {'ratio':>6}"
    )
    for world in args.sizes:
        results: dict[str, list[tuple[float, float]]] = {"raw": [], "slurmgen": []}
        for _ in range(args.reps):  # interleaved, so drifting load hits both alike
            for mode in results:
                results[mode].append(one_run(mode, world))
        raw_ready, ours_ready = (statistics.median(r[0] for r in results[m]) for m in results)
        raw_init, ours_init = (statistics.median(r[1] for r in results[m]) for m in results)
        print(
            f"{world:5d} {raw_ready:12.2f} {ours_ready:17.2f} {ours_ready / raw_ready:6.2f} "
            f"{raw_init * 1e3:12.1f} {ours_init * 1e3:17.1f} {ours_init / raw_init:6.2f}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at end")


if __name__ == "__main__":
    main()
