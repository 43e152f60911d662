"""Requeue this job once, the right way: by its own key, within its budget, from wherever scontrol exists.

- The key is `<array_job>_<task>` for an array task, so one task is requeued and not the whole array
  (Lightning #15022); a plain job id otherwise.
- `scontrol requeue Incomplete` acts only while the job still runs, so a requeue racing with the end of the
  job never restarts a finished one, and a second call while it is already pending is a harmless no-op.
- Inside a container (pyxis/enroot) there is no scontrol (pyxis #129): the task leaves a marker in the state
  directory and the batch shell, which runs outside the container, requeues when the step ends.
- The budget counts runs across requeues (SLURM_RESTART_COUNT, unset on the first run); past it, no requeue.
- Every requeue is recorded, one line, with its cause, in `<state_dir>/<key>.requeues`.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slurmgen import contract
from slurmgen.atomic import write_text
from slurmgen.runtime.env import job_key, restart_count


@dataclass(frozen=True)
class RequeueOutcome:
    action: str  # "requeued", "batch-shell", "budget", "disabled", "not-slurm", "failed"
    message: str


def budget(mapping: Mapping[str, str]) -> int | None:
    text = mapping.get(contract.MAX_REQUEUES, "").strip()
    return int(text) if text.isdigit() else None


def history_path(state_dir: str, key: str) -> str:
    return os.path.join(state_dir, key + contract.HISTORY_SUFFIX)


def record(state_dir: str, key: str, run: int, cause: str, by: str) -> None:
    os.makedirs(state_dir, exist_ok=True)
    line = f"run={run} cause={cause} by={by} time={int(time.time())}\n"
    fd = os.open(history_path(state_dir, key), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def last_cause(state_dir: str, key: str) -> str | None:
    """The cause of the last requeue recorded for this job, if any."""
    try:
        with open(history_path(state_dir, key), encoding="utf-8") as handle:
            lines = [line for line in handle.read().splitlines() if line.strip()]
    except OSError:
        return None
    for part in lines[-1].split() if lines else []:
        if part.startswith("cause="):
            return part.removeprefix("cause=")
    return None


def ask_batch_shell(state_dir: str, key: str, cause: str) -> None:
    """Leave the marker the batch shell looks for after the step (written atomically)."""
    os.makedirs(state_dir, exist_ok=True)
    write_text(os.path.join(state_dir, contract.requeue_marker_name(key)), cause + "\n")


def requeue_this_job(
    cause: str,
    mapping: Mapping[str, str] | None = None,
    state_dir: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> RequeueOutcome:
    """Requeue the job this process runs in (call it from one rank only)."""
    env = os.environ if mapping is None else mapping
    key = job_key(env)
    if key is None:
        return RequeueOutcome("not-slurm", "not inside a Slurm job: nothing to requeue")
    run = restart_count(env)
    limit = budget(env)
    if limit is not None and run >= limit:
        return RequeueOutcome(
            "budget",
            f"not requeueing job {key} ({cause}): its requeue budget is used up ({run} of {limit}, "
            "preemption.max_requeues)",
        )
    state_dir = state_dir or env.get(contract.STATE_DIR) or "."
    in_container = env.get(contract.CONTAINER) == "1"
    if in_container or which("scontrol") is None:
        record(state_dir, key, run + 1, cause, "rank0-via-batch-shell")
        ask_batch_shell(state_dir, key, cause)
        where = "inside a container" if in_container else "scontrol is not on PATH"
        return RequeueOutcome("batch-shell", f"asked the batch shell to requeue job {key} ({cause}; {where})")
    from slurmgen.errors import SchedulerError
    from slurmgen.slurm.client import JobPending, RequeueDisabled, SlurmClient

    try:
        SlurmClient(timeout=60).requeue(key, incomplete=True)
    except RequeueDisabled:
        return RequeueOutcome("disabled", f"job {key} was submitted with --no-requeue; not requeued")
    except JobPending:
        return RequeueOutcome("requeued", f"job {key} is already pending (requeued by someone else)")
    except SchedulerError as exc:
        # Let the batch shell try once the step has ended; it runs outside any container.
        record(state_dir, key, run + 1, cause, "rank0-via-batch-shell")
        ask_batch_shell(state_dir, key, cause)
        return RequeueOutcome("batch-shell", f"scontrol requeue failed ({exc}); asked the batch shell to requeue")
    record(state_dir, key, run + 1, cause, "rank0")
    return RequeueOutcome("requeued", f"requeue issued for job {key} ({cause}; requeue {run + 1} of {limit})")
