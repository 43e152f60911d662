"""`slurmgen status SWEEP`: one row per point (its latest attempt) and a summary, from ONE Slurm query however
many points and arrays there are (`squeue --jobs=<every array> --states=all`, slurmgen.slurm.array_queue). A
pending range is one row (`123_[5-999%4]`) that stands for many points.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from slurmgen.slurm.array_queue import TaskRow
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.ids import JobState, parse_job_id
from slurmgen.slurm.times import format_duration
from slurmgen.submission.sweep_plan import expand
from slurmgen.submission.sweep_record import SweepRecord

COLUMNS = ("POINT", "VALUES", "JOB", "STATE", "RESTARTS", "ELAPSED", "EXIT")
GONE = "gone"  # Slurm no longer knows the task (it ended over MinJobAge ago)
FAILED_STATES = frozenset({JobState.FAILED, JobState.TIMEOUT, JobState.CANCELLED})


@dataclass(frozen=True)
class PointRow:
    index: int
    values: str
    job: str  # the point's latest array task, e.g. 123_4
    state: str
    restarts: str = ""
    elapsed: str = ""
    exit: str = ""
    failed: bool = False  # ended in FAILED, TIMEOUT or CANCELLED (what `resubmit --failed` reruns)

    def cells(self) -> tuple[str, ...]:
        return (str(self.index), self.values, self.job, self.state, self.restarts, self.elapsed, self.exit)


def query(client: SlurmClient, record: SweepRecord) -> list[TaskRow]:
    """The one Slurm call, for every array of every attempt."""
    return client.array_tasks({parse_job_id(str(e.job_id)).job for e in record.arrays})


def state_label(row: TaskRow) -> str:
    """The folded state, with Slurm's own word when it says more: FAILED (NODE_FAIL)."""
    label = row.state.name
    return f"{label} ({row.state_name})" if row.state_name and row.state_name != label else label


def exit_label(row: TaskRow) -> str:
    if not row.state.is_terminal:
        return ""
    if row.exit_signal:
        return f"signal {row.exit_signal}"
    return "" if row.exit_code is None else str(row.exit_code)


def point_rows(record: SweepRecord, tasks: Sequence[TaskRow]) -> list[PointRow]:
    by_task: dict[tuple[int, int], TaskRow] = {}
    for row in tasks:
        if row.job.array_task is not None:
            by_task[(row.job.job, row.job.array_task)] = row
        elif row.job.array_tasks is not None:  # a pending range stands for each of its tasks
            for task in expand(row.job.array_tasks):
                by_task.setdefault((row.job.job, task), row)
    rows = []
    latest = record.latest()
    for index in range(len(record.sweep.points)):
        values = record.sweep.shown(index)
        if index not in latest:
            rows.append(PointRow(index, values, "-", "NOT SUBMITTED"))
            continue
        job, _attempt = latest[index]
        found = by_task.get((job.job, job.array_task or 0))
        if found is None:
            rows.append(PointRow(index, values, str(job), GONE))
            continue
        info = found
        ran = info.job.array_task is not None
        rows.append(
            PointRow(
                index,
                values,
                str(job),
                state_label(info),
                restarts=str(info.restarts) if ran else "",
                elapsed=format_duration(info.elapsed or 0) if ran else "",
                exit=exit_label(info) if ran else "",
                failed=ran and info.state in FAILED_STATES,
            )
        )
    return rows


def summary(record: SweepRecord, rows: Sequence[PointRow]) -> str:
    counts = Counter(r.state.split(" ")[0] for r in rows)
    parts = ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    attempts = f", {record.attempts} submissions" if record.attempts > 1 else ""
    return f"sweep {record.sweep_id}: {len(rows)} points: {parts}{attempts}"


def table(rows: Sequence[PointRow]) -> str:
    grid = [COLUMNS, *(r.cells() for r in rows)]
    widths = [max(len(line[k]) for line in grid) for k in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in grid)
