"""Submitting a sweep plan (slurmgen.submission.sweep_plan): one sbatch per array, each recorded in the journal with
the sweep's id, the array's offset and task ids, so status/logs/cancel/resubmit find every point from any shell.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from slurmgen.backends.slurm_here.sbatch import (
    Which,
    _record,
    ensure_writable,
    entry,
    find_by_token,
    on_path,
    prepare,
    require_sbatch,
)
from slurmgen.errors import SchedulerError, SchedulerMissing, UsageError
from slurmgen.journal import TOKEN_PREFIX, Entry, Journal
from slurmgen.slurm.client import SchedulerTimeout, SlurmClient
from slurmgen.slurm.ids import JobId
from slurmgen.submission.sweep_plan import DEFAULT_MAX_ARRAY_SIZE, SweepPlan

SWEEP_KEY = "sweep"  # Entry.extra keys of an array of a sweep
OFFSET_KEY = "offset"
TASKS_KEY = "tasks"
ATTEMPT_KEY = "attempt"
COPY_KEY = "copy"  # a sweep submitted over ssh: the local copy of its run directory (manage.remote_sweep)


@dataclass(frozen=True)
class SweepSubmission:
    sweep_id: str
    jobs: tuple[JobId, ...]  # one array job id per array, in order
    problems: tuple[str, ...] = ()


def max_array_size(client: SlurmClient) -> int:
    """MaxArraySize of the cluster, read now (`scontrol show config`), so a split always matches the cluster."""
    from slurmgen.slurm.site_config import parse_config

    raw = parse_config(client.show_config()).raw.get("MaxArraySize", "")
    return int(raw) if raw.strip().isdigit() else DEFAULT_MAX_ARRAY_SIZE


def sweep_extra(sp: SweepPlan, k: int) -> dict[str, object]:
    """What the journal keeps of array k of a sweep (Entry.extra): the sweep's id, the array's offset and tasks."""
    array = sp.arrays[k]
    return {SWEEP_KEY: sp.sweep_id, OFFSET_KEY: array.offset, TASKS_KEY: array.tasks, ATTEMPT_KEY: sp.attempt}


def _entry_of(
    sp: SweepPlan, k: int, event: str, job: JobId | None = None, cluster: str | None = None, **extra: object
) -> Entry:
    e = entry(sp.plan, event, job, cluster, **extra)
    return replace(e, token=sp.token(k), array=True, extra={**sweep_extra(sp, k), **e.extra})


def submit_sweep(
    sp: SweepPlan,
    client: SlurmClient,
    journal: Journal,
    *,
    which: Which = on_path,
    sleep: Callable[[float], None] = time.sleep,
    fresh: bool = True,
) -> SweepSubmission:
    """One sbatch per array, in order (array k+1 may depend on array k's id). ``fresh``: write the run directory
    (a resubmission reuses the first one's script, so every point keeps its values)."""
    require_sbatch(which)
    p = sp.plan
    if fresh:
        prepare(p, journal.base)
    else:
        ensure_writable(p.log_dir, "output", p.source)
        if p.state_dir is not None:
            ensure_writable(p.state_dir, "preemption.state_dir", p.source)
    jobs: list[JobId] = []
    problems: list[str] = []
    for k in range(len(sp.arrays)):
        done = ", ".join(str(j) for j in jobs) or "none"
        previous = str(jobs[-1]) if jobs else None
        try:
            journal.append(_entry_of(sp, k, "submitting"))
        except OSError as exc:
            raise UsageError(f"cannot write the journal {journal.path} ({exc.strerror or exc})") from None
        try:
            submitted = client.sbatch(p.script_path, sp.sbatch_args(k, previous))
        except SchedulerTimeout as exc:
            found = find_by_token(client, p.spec.name, sp.token(k), sleep)
            if not found:
                _record(journal, _entry_of(sp, k, "unknown", error=str(exc)))
                raise SchedulerTimeout(
                    f"sbatch of array {k + 1} of {len(sp.arrays)} gave no answer, and no job with the comment "
                    f"{TOKEN_PREFIX}{sp.token(k)} is in the queue; arrays submitted before it: {done}. "
                    f"See them with: slurmgen status {sp.sweep_id}"
                ) from None
            problems += _record(journal, _entry_of(sp, k, "submitted", found[0], recovered=True))
            jobs.append(found[0])
            continue
        except (SchedulerError, SchedulerMissing) as exc:
            _record(journal, _entry_of(sp, k, "failed", error=str(exc)))
            raise type(exc)(
                f"array {k + 1} of {len(sp.arrays)} of sweep {sp.sweep_id} was refused: {exc} "
                f"(arrays submitted before it: {done})"
            ) from None
        problems += _record(journal, _entry_of(sp, k, "submitted", submitted.job_id, submitted.cluster))
        jobs.append(submitted.job_id)
    return SweepSubmission(sp.sweep_id, tuple(jobs), tuple(problems))
