"""A job's run history written by hand with slurmgen.run_history.append, as the batch shell and rank 0 write it:
three runs of a 2-node job (preempted and requeued by Slurm; stopped at its time limit and requeued by rank 0; done).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slurmgen import run_history

T0 = 1_790_000_000.0  # epoch seconds of the first run's start
GIB = 1 << 30
# The site each run recorded at its start (slurm.site.site_preemption_event): REQUEUE, GraceTime 30, KillWait 5,
# no user signal, a 60 s lead time.
SITE: dict[str, Any] = {
    "partition": "low", "mode": "REQUEUE", "grace": 30, "user_signal": False, "kill_wait": 5,
    "job_requeue": True, "windows": {"preemption": 35.0, "time-limit": 60.0}, "version": "22.05.8",
    "preempt_type": "preempt/partition_prio",
}  # fmt: skip


def write_three_runs(log_dir: Path, site: dict[str, Any] | None = SITE, last_save: float = 50.0) -> None:
    """Run 1: preempted, saved 12.5 s (1.5 GiB), requeued by Slurm. Run 2: time-limit signal, a ``last_save``
    second save (2 GiB) after a 4 s step, requeued by rank 0. Run 3: finished with exit 0."""
    d = str(log_dir)
    extra = {} if site is None else {"site": site}
    a = run_history.append
    a(d, "batch-shell", run_history.RUN_START, 1, T0, nodes="node[1-2]", **extra)
    a(d, "batch-shell", run_history.PREEMPTED, 1, T0 + 100, mode="REQUEUE")
    a(d, "rank0", run_history.STOP, 1, T0 + 101, cause=run_history.PREEMPTION, step_seconds=1.0)
    a(d, "rank0", run_history.SAVE, 1, T0 + 114, seconds=12.5, bytes=GIB * 3 // 2, cause=run_history.PREEMPTION)
    a(d, "slurm", run_history.REQUEUE, 1, T0 + 130, cause=run_history.PREEMPTION, mode="REQUEUE")
    a(d, "batch-shell", run_history.RUN_END, 1, T0 + 131, exit_code=143)
    a(d, "batch-shell", run_history.RUN_START, 2, T0 + 200, nodes="node[2-3]", **extra)
    a(d, "batch-shell", run_history.SIGNAL, 2, T0 + 800, sig="USR1")
    a(d, "rank0", run_history.STOP, 2, T0 + 801, cause=run_history.TIME_LIMIT, step_seconds=4.0)
    a(d, "rank0", run_history.SAVE, 2, T0 + 802 + last_save, seconds=last_save, bytes=2 * GIB,
      cause=run_history.TIME_LIMIT)  # fmt: skip
    a(d, "rank0", run_history.REQUEUE, 2, T0 + 860, cause=run_history.TIME_LIMIT)
    a(d, "batch-shell", run_history.RUN_END, 2, T0 + 861, exit_code=0)
    a(d, "batch-shell", run_history.RUN_START, 3, T0 + 900, nodes="node[1-2]", **extra)
    a(d, "batch-shell", run_history.RUN_END, 3, T0 + 1500, exit_code=0)
