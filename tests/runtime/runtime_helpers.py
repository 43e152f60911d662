"""Helpers for the runtime tests: environments for fake tasks, free ports, the worker program's command line
(tests/ranks.py starts and reaps the rank processes)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
WORKER = HERE / "worker.py"


def free_port() -> int:
    """A port the kernel just handed out and released: free now, and inside the ephemeral range."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_low_port() -> int:
    """A free port below the ephemeral range, for the computed-port path (SLURMGEN_PORT, range 1)."""
    start = 20000 + os.getpid() % 5000
    for port in range(start, start + 500):
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-25500")


# Variables that would steer a job or its ranks: an enclosing allocation's, a developer's MASTER_PORT, torchrun's.
STEERING = (
    *("SLURM", "SBATCH", "SRUN", "SLURMGEN", "MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"),
    *("GROUP_RANK", "TORCHELASTIC", "NCCL_", "GLOO_", "TORCH_NCCL"),
)


def without_steering() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(STEERING)}


def base_env(**extra: str) -> dict[str, str]:
    """The parent's environment minus anything that would steer ranks, set up to run the tests' workers."""
    env = without_steering()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONWARNINGS"] = "ignore"  # torch warns about a missing NumPy on import
    env.update(extra)
    return env


def worker(mode: str, *args: str) -> list[str]:
    """The command line of tests/runtime/worker.py in ``mode`` (its docstring lists them)."""
    return [sys.executable, str(WORKER), mode, *args]


def srun_env(rank: int, world: int, job_id: int, **extra: str) -> dict[str, str]:
    """What srun gives a task of a one-node step on 'localhost'."""
    return base_env(
        SLURM_JOB_ID=str(job_id),
        SLURM_PROCID=str(rank),
        SLURM_LOCALID=str(rank),
        SLURM_NTASKS=str(world),
        SLURM_NODEID="0",
        SLURM_STEP_TASKS_PER_NODE=str(world),
        SLURM_STEP_NODELIST="localhost",
        SLURM_JOB_NODELIST="localhost",
        **extra,
    )
