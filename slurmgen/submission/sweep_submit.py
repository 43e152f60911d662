"""The one sweep path: a sweep plan (slurmgen.submission.sweep_plan) sent as one submission per array, in order
(array k+1 may depend on array k's id), through whichever backend submits it. Each array is recorded in the journal
with the sweep's id, the array's offset and task ids, so status/logs/cancel/resubmit find every point from any
shell. A backend says only how one array reaches Slurm (`SendArray`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slurmgen.errors import SchedulerError, SchedulerMissing
from slurmgen.slurm.client import SchedulerTimeout, SlurmClient
from slurmgen.submission.sweep_plan import DEFAULT_MAX_ARRAY_SIZE, SweepPlan

SWEEP_KEY = "sweep"  # Entry.extra keys of an array of a sweep
OFFSET_KEY = "offset"
TASKS_KEY = "tasks"
ATTEMPT_KEY = "attempt"
COPY_KEY = "copy"  # a sweep submitted over ssh: the local copy of its run directory (backends.slurm_ssh)


@dataclass(frozen=True)
class SweepSubmission:
    sweep_id: str
    jobs: tuple[str, ...]  # one array job id per array, in order
    problems: tuple[str, ...] = ()


# Send array k with these sbatch options (its dependency on array k-1 included); its job id and the problems to
# report (the journal could not be written after sbatch ran, say). The backend records each event of it.
SendArray = Callable[[int, tuple[str, ...]], tuple[str, tuple[str, ...]]]


def max_array_size(client: SlurmClient) -> int:
    """MaxArraySize of the cluster, read now (`scontrol show config`), so a split always matches the cluster."""
    from slurmgen.slurm.site_config import parse_config

    raw = parse_config(client.show_config()).raw.get("MaxArraySize", "")
    return int(raw) if raw.strip().isdigit() else DEFAULT_MAX_ARRAY_SIZE


def sweep_extra(sp: SweepPlan, k: int) -> dict[str, object]:
    """What the journal keeps of array k of a sweep (Entry.extra): the sweep's id, the array's offset and tasks."""
    array = sp.arrays[k]
    return {SWEEP_KEY: sp.sweep_id, OFFSET_KEY: array.offset, TASKS_KEY: array.tasks, ATTEMPT_KEY: sp.attempt}


def send_sweep(sp: SweepPlan, send: SendArray) -> SweepSubmission:
    """Every array of the sweep, in order, through ``send``. A refusal or a timeout names the array and the arrays
    already submitted (they stay: `slurmgen status SWEEP` shows them)."""
    jobs: list[str] = []
    problems: list[str] = []
    for k in range(len(sp.arrays)):
        done = ", ".join(jobs) or "none"
        try:
            job, said = send(k, sp.sbatch_args(k, jobs[-1] if jobs else None))
        except SchedulerTimeout as exc:
            raise SchedulerTimeout(f"array {k + 1} of {len(sp.arrays)} of sweep {sp.sweep_id}: {exc}; arrays "
                                   f"submitted before it: {done}. See them with: slurmgen status {sp.sweep_id}"
                                   ) from None  # fmt: skip
        except (SchedulerError, SchedulerMissing) as exc:
            raise type(exc)(
                f"array {k + 1} of {len(sp.arrays)} of sweep {sp.sweep_id} was refused: {exc} "
                f"(arrays submitted before it: {done})"
            ) from None
        jobs.append(job)
        problems += said
    return SweepSubmission(sp.sweep_id, tuple(jobs), tuple(problems))
