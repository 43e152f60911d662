"""One node's check before a start of the step: run once per node by batch/nodes.py's check step.

    python3 -m slurmgen.batch.node_check --gpus N --state-dir DIR --need BYTES --timeout S [-- HEALTH_CHECK...]

Prints one JSON line, `{"node": ..., "ok": ..., "reason": ...}`, and exits 0 whatever the verdict (a non-zero
exit would make srun end the other nodes' checks). Each check is bounded by --timeout seconds; a check that does
not finish in time fails the node, with that as its reason:
- GPUs (only with --gpus above 0): `nvidia-smi -L` lists the GPUs the driver can reach, so a GPU that fell off
  the bus ("Xid 79") or a driver that hangs shows here, which CUDA_VISIBLE_DEVICES cannot show (it only says what
  Slurm assigned). The count is capped by the GPUs Slurm gave the step (CUDA_VISIBLE_DEVICES), as nvidia-smi
  sees every GPU of the machine where the devices are not constrained by cgroups (cgroup.conf ConstrainDevices).
  Without nvidia-smi, CUDA_VISIBLE_DEVICES is counted and the reason says so.
- the state directory: a file is written, flushed to disk and removed, and statvfs(2) must show room for the
  newest complete checkpoint (--need bytes, measured once by the batch shell). Done in a thread, so that a dead
  network file system fails the node after --timeout instead of hanging the check.
- the user's `recovery.health_check` (the argv after `--`), in its own session, killed with it on time-out.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

from slurmgen.job_context.context import JobContext


def node_name(ctx: JobContext) -> str:
    return ctx.node_name or socket.gethostname()


def gpu_problem(want: int, env: Mapping[str, str], timeout: float) -> str | None:
    """Why the GPUs this node shows do not match ``want``, or None."""
    if want <= 0:
        return None
    given = [g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        if len(given) >= want:
            return None
        return f"{len(given)} GPU(s) visible (CUDA_VISIBLE_DEVICES; no nvidia-smi), {want} wanted (gpus_per_node)"
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"nvidia-smi -L did not answer within {timeout:g} s"
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()
        return f"nvidia-smi -L failed (exit {done.returncode}{': ' + last[-1] if last else ''})"
    seen = sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))
    if given:
        seen = min(seen, len(given))
    return None if seen >= want else f"{seen} GPU(s) visible (nvidia-smi -L), {want} wanted (gpus_per_node)"


def _bounded(what: Callable[[], str | None], timeout: float, late: str) -> str | None:
    """``what()`` in a daemon thread; ``late`` when it has not returned within ``timeout`` seconds."""
    out: list[str | None] = []
    worker = threading.Thread(target=lambda: out.append(what()), daemon=True)
    worker.start()
    worker.join(timeout)
    return out[0] if out else late


def state_dir_problem(state_dir: str, need: int, node: str) -> str | None:
    """Why the state directory cannot take the next save here, or None."""
    probe = os.path.join(state_dir, f".slurmgen-node-check-{node}-{os.getpid()}")
    try:
        os.makedirs(state_dir, exist_ok=True)
        with open(probe, "wb") as handle:
            handle.write(b"x")
            handle.flush()
            os.fsync(handle.fileno())
        os.unlink(probe)
        stats = os.statvfs(state_dir)
    except OSError as exc:
        return f"the state directory {state_dir} is not writable ({exc.strerror or exc})"
    free = stats.f_bavail * stats.f_frsize
    if free < need:
        return (f"the state directory {state_dir} has {free // 1024} KiB free, the newest checkpoint needs "
                f"{need // 1024} KiB")  # fmt: skip
    return None


def health_problem(argv: Sequence[str], timeout: float) -> str | None:
    """Why the user's health check failed, or None."""
    if not argv:
        return None
    try:
        proc = subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
    except OSError as exc:
        return f"health check {argv[0]!r} cannot start ({exc.strerror or exc})"
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"health check did not finish within {timeout:g} s"
    if proc.returncode == 0:
        return None
    last = [line.strip() for line in output.splitlines() if line.strip()]
    return f"health check failed (exit {proc.returncode}{': ' + last[-1][:200] if last else ''})"


def verdict(
    ctx: JobContext, gpus: int, state_dir: str, need: int, timeout: float, health: Sequence[str]
) -> dict[str, object]:
    env = ctx.environ
    node = node_name(ctx)
    checks: list[Callable[[], str | None]] = [
        lambda: gpu_problem(gpus, env, timeout),
        lambda: _bounded(
            lambda: state_dir_problem(state_dir, need, node) if state_dir else None,
            timeout,
            f"the state directory {state_dir} did not answer within {timeout:g} s",
        ),
        lambda: health_problem(health, timeout),
    ]
    for check in checks:
        problem = check()
        if problem is not None:
            return {"node": node, "ok": False, "reason": problem}
    return {"node": node, "ok": True, "reason": ""}


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    import argparse

    args = list(sys.argv[1:] if argv is None else argv)
    health = args[args.index("--") + 1 :] if "--" in args else []
    own = args[: args.index("--")] if "--" in args else args
    parser = argparse.ArgumentParser(prog="python3 -m slurmgen.batch.node_check")
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--state-dir", default="")
    parser.add_argument("--need", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0)
    opts = parser.parse_args(own)
    job = JobContext.from_environ(os.environ if env is None else env)  # this process's one read of its job
    result = verdict(job, opts.gpus, opts.state_dir, opts.need, opts.timeout, health)
    # One write: the nodes' checks share srun's stdout in a local run, and under PYTHONUNBUFFERED (the script's)
    # print() writes the line and its newline apart, so two nodes' verdicts could interleave.
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
