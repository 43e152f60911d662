"""Helpers for the runtime tests: environments for fake tasks, and rank processes that are always reaped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    elapsed: float

    def json(self) -> dict[str, Any]:
        lines = [line for line in self.stdout.splitlines() if line.startswith("{")]
        assert lines, f"no JSON line; rc={self.returncode}\nstdout:{self.stdout}\nstderr:{self.stderr[-3000:]}"
        return dict(json.loads(lines[-1]))


class RankProcs:
    """Start processes in their own process groups; wait with a deadline; kill the groups in teardown."""

    def __init__(self) -> None:
        self.procs: list[tuple[subprocess.Popen[str], float]] = []

    def start(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.procs.append((proc, time.monotonic()))
        return proc

    def worker(self, mode: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
        return self.start([sys.executable, str(WORKER), mode, *args], env)

    def wait_all(self, timeout: float) -> list[Result]:
        deadline = time.monotonic() + timeout
        results = []
        for proc, started in self.procs:
            try:
                out, err = proc.communicate(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.kill()
                out, err = proc.communicate()
                pytest.fail(f"pid {proc.pid} still running after {timeout}s (a hang)\n{err[-3000:]}")
            results.append(Result(proc.returncode, out, err, time.monotonic() - started))
        return results

    def kill(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the group: our child and anything it started
                proc.wait()


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
