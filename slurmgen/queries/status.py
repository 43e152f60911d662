"""`slurmgen status`: one table row per job record, from `scontrol show job` where Slurm still knows the job
and from the journal where it does not (there is no sacct on every cluster; finished jobs vanish from scontrol
MinJobAge seconds after they end). Building rows and the table is pure; `rows_for` does the asking.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slurmgen.journal import Entry, Journal, latest_per_job, slurm_cluster, unresolved
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.ids import JobState, cluster_label, parse_job_id, parse_state
from slurmgen.slurm.showjob import JobInfo
from slurmgen.slurm.times import format_duration
from slurmgen.submission.targets import Target

UNKNOWN = "UNKNOWN"  # the state of a job Slurm does not know (never did, or it ended over MinJobAge ago)
RECENT = 10  # jobs shown by `slurmgen status` without an argument
# REQUEUES is Slurm's restart count (scontrol's Restarts: the job's requeues); STEP RESTARTS counts the run
# history's restarts of the step inside the allocation, which Slurm never sees.
COLUMNS = (
    "JOB", "NAME", "STATE", "REASON", "REQUEUES", "STEP RESTARTS", "NODES", "ELAPSED/LIMIT", "EXIT",
    "FAILED FIRST", "SUBMITTED",
)  # fmt: skip


@dataclass(frozen=True)
class Row:
    job: str
    name: str
    state: str
    reason: str = ""
    restarts: str = ""  # Slurm's count: requeues
    step_restarts: str = ""  # restarts of the step inside the allocation (run history); "" when not known
    nodes: str = ""
    elapsed: str = ""
    exit: str = ""
    failed_first: str = ""  # the task whose own failure ended the last run (run history), e.g. rank 1 on node1
    submitted: str = ""

    def cells(self) -> tuple[str, ...]:
        return (self.job, self.name, self.state, self.reason, self.restarts, self.step_restarts, self.nodes,
                self.elapsed, self.exit, self.failed_first, self.submitted)  # fmt: skip


def state_label(info: JobInfo) -> str:
    """The folded state (UNKNOWN for a word slurmgen does not know), with Slurm's own word when it says more:
    FAILED (NODE_FAIL), UNKNOWN (SOMETHING_NEW); HELD is a PENDING job with a hold reason."""
    label = info.state.name
    if info.state_name and info.state_name != label and info.state is not JobState.HELD:
        label += f" ({info.state_name})"
    return label


def exit_label(info: JobInfo) -> str:
    if not info.state.is_terminal:
        return ""
    if info.exit_signal:
        return f"signal {info.exit_signal}"
    return "" if info.exit_code is None else str(info.exit_code)


def when(epoch: float, now: float) -> str:
    fmt = "%H:%M:%S" if now - epoch < 86400 else "%Y-%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(epoch))


def row_from_info(
    info: JobInfo,
    entry: Entry | None,
    now: float,
    failed_first: str | None = None,
    step_restarts: int | None = None,
    cluster: str | None = None,
) -> Row:
    return Row(
        job=cluster_label(cluster, info.job_id),
        name=info.name,
        state=state_label(info),
        reason=info.reason or "",
        restarts=str(info.restarts),
        step_restarts="" if step_restarts is None else str(step_restarts),
        nodes=info.nodes or "",
        elapsed=f"{format_duration(info.elapsed or 0)}/{format_duration(info.time_limit)}",
        exit=exit_label(info),
        failed_first=(failed_first or "") if info.state.is_terminal and info.exit_code else "",
        submitted=when(entry.time, now) if entry else "",
    )


def row_from_entry(entry: Entry, now: float) -> Row:
    """A job Slurm no longer knows (or never knew: an unresolved submission): what the journal says."""
    if entry.job_id is None:
        state = "UNKNOWN" if entry.event == "unknown" else "SUBMITTING"
        reason = "sbatch timed out; not found in the queue" if entry.event == "unknown" else "no job id yet"
        return Row(job="?", name=entry.name, state=state, reason=reason, submitted=when(entry.time, now))
    return Row(
        job=cluster_label(slurm_cluster(entry), entry.job_id),
        name=entry.name,
        state="gone",
        reason="Slurm has forgotten it (it ended over MinJobAge ago)",
        submitted=when(entry.time, now),
    )


def rows_for(
    targets: Sequence[Target],
    client: SlurmClient,
    clock: Callable[[], float] = time.time,
    failing: Callable[[Target, list[JobInfo]], str | None] = lambda target, infos: None,
    step_restarts: Callable[[Target, list[JobInfo]], int | None] = lambda target, infos: None,
) -> tuple[list[Row], list[Target]]:
    """Rows for each target (an array job gives one per record), and the targets Slurm does not know.
    ``failing`` names the task that failed first in a job's last run (jobs.history.last_failing);
    ``step_restarts`` counts the step's restarts inside the allocation (jobs.history.step_restarts)."""
    rows: list[Row] = []
    unknown: list[Target] = []
    now = clock()
    for target in targets:
        infos = client.on_cluster(target.cluster).show_jobs(target.job)
        if target.job.array_task is not None:  # one task asked: not its siblings
            infos = [i for i in infos if i.job_id == target.job.without_step()] or infos
        if infos:
            first = failing(target, infos) if len(infos) == 1 and infos[0].state.is_terminal else None
            restarted = step_restarts(target, infos) if len(infos) == 1 else None
            rows.extend(row_from_info(info, target.entry, now, first, restarted, target.cluster) for info in infos)
        elif target.entry is not None:
            rows.append(row_from_entry(target.entry, now))
        else:
            unknown.append(target)
    return rows, unknown


def recent(
    journal: Journal, client: SlurmClient, clock: Callable[[], float] = time.time
) -> tuple[list[Target], list[Row], list[str]]:
    """The journal's last RECENT jobs, rows for submissions without a job id, and notes about submissions whose
    sbatch timed out and that turned up in the queue since. Reads only: the next `submit` records those."""
    from slurmgen.submission.recovery import find_unresolved

    entries = journal.entries()
    found, notes = find_unresolved(entries, client, clock)
    seen = entries + found
    targets = [Target(parse_job_id(e.job_id), e) for e in latest_per_job(seen)[-RECENT:] if e.job_id]
    now = clock()
    return targets, [row_from_entry(e, now) for e in unresolved(seen)], notes


def fold(names: list[str]) -> str:
    """One state word for a job's records: a plain job's own; for an array's tasks RUNNING while any task runs,
    else the first other live word (PENDING...), else the first word other than COMPLETED, else COMPLETED."""
    if not names:
        return UNKNOWN
    live = [n for n in names if not parse_state(n).is_terminal]
    if live:
        return "RUNNING" if "RUNNING" in live else live[0]
    return next((n for n in names if n != "COMPLETED"), names[0])


def table(rows: Sequence[Row]) -> str:
    """Left-aligned columns; columns empty in every row are left out."""
    cells = [r.cells() for r in rows]
    keep = [i for i in range(len(COLUMNS)) if i < 3 or any(c[i] for c in cells)]
    grid = [tuple(COLUMNS[i] for i in keep), *(tuple(c[i] for i in keep) for c in cells)]
    widths = [max(len(line[k]) for line in grid) for k in range(len(keep))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in grid)
