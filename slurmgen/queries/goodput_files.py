"""The files behind `slurmgen report` and the live part of `slurmgen status`: a job's run history (one per array
task), read once; the numbers are slurmgen/goodput/'s pure functions of it. No Slurm query for a job the journal
knows (submitted or run here); one scontrol question to find another job's logs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmgen import run_history
from slurmgen.errors import UsageError
from slurmgen.goodput.advice import ENOUGH, pooled_rate, rebased
from slurmgen.goodput.summary import Report, SweepReport, gc_paused, partition_of, rate_of, report
from slurmgen.queries import fanout
from slurmgen.queries.history import job_log_dirs, no_history
from slurmgen.slurm.ids import JobId
from slurmgen.submission.targets import Target

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.submission.sweep_record import SweepRecord


@dataclass(frozen=True)
class JobHistory:
    key: str  # the job's key (<id> or <array>_<task>), as in its log directory's name
    log_dir: Path
    events: list[dict[str, Any]]


def histories(target: Target, client: SlurmClient | None) -> list[JobHistory]:
    """The run history of each log directory of the job (one, or one per array task), where one was written."""
    known = target.entry is not None and bool(target.entry.log_dir)
    infos = [] if known or client is None else client.show_jobs(target.job)
    found = []
    for log_dir in job_log_dirs(target, infos):
        events = run_history.read(str(log_dir))
        if events:
            name = target.entry.name if target.entry is not None else ""
            found.append(JobHistory(log_dir.name.removeprefix(f"{name}-"), log_dir, events))
    return found


def job_report(target: Target, client: SlurmClient | None, now: float | None = None) -> list[Report]:
    """One report per run history of the job (an array job: one per task); an error line when there is none."""
    found = histories(target, client)
    if not found:
        raise UsageError(no_history(target, job_log_dirs(target, []), client is not None))
    moment = time.time() if now is None else now
    return [pooled(target, h, report(h.key, h.events, moment), moment) for h in found]


def pooled(target: Target, own: JobHistory, r: Report, now: float) -> Report:
    """`r` with its advice's interruption rate pooled with the journal's other jobs on the same cluster and
    partition when this job alone has seen too few interruptions (advice.pooled_rate); `r` as it is otherwise.
    Reads the peers' histories only then; the journal is the one this job was found in."""
    entry = target.entry
    partition = partition_of(own.events)
    if r.advice is None or r.advice.interruptions >= ENOUGH or entry is None or target.local or partition is None:
        return r
    from slurmgen.journal import Journal, find_home
    from slurmgen.slurm.ids import parse_job_id

    peers = []
    for e in Journal(find_home()).jobs():
        if e.job_id is None or e.job_id == entry.job_id or not e.log_dir or e.cluster != entry.cluster:
            continue
        for h in histories(Target(parse_job_id(e.job_id), e), None):
            if partition_of(h.events) == partition:
                peers.append(rate_of(h.events, now))
    where = f"{entry.cluster or 'this cluster'}/{partition}"
    n, seconds, basis = pooled_rate((r.advice.interruptions, r.advice.observed_seconds), peers, where)
    return r if basis == r.advice.basis else replace(r, advice=rebased(r.advice, n, seconds, basis))


def sweep_report(record: SweepRecord, now: float | None = None, detail: bool = True) -> SweepReport:
    """Every point's report (its latest array task) and the roll-up; points that never started are left out.
    Without `detail` the points' reports have neither markers nor advice (summary.report)."""
    by_array = {e.job_id: e for e in record.arrays if e.job_id}
    work = []
    for point, (job, _) in sorted(record.latest().items()):
        entry = by_array.get(str(JobId(job.job)))
        if entry is not None:
            work.append((point, Target(job, entry)))
    points = [point for point, _ in work]
    return points_report(record.sweep_id, work, {p: record.sweep.values(p) for p in points},
                         {p: record.sweep.shown(p) for p in points}, now, detail)  # fmt: skip


def points_report(
    label: str,
    work: Sequence[tuple[int, Target]],
    values: Mapping[int, Mapping[str, Any]],
    shown: Mapping[int, str],
    now: float | None = None,
    detail: bool = True,
) -> SweepReport:
    """The roll-up of a group's points (a sweep's, here, on Slurm or emulated), each point's job given by its
    target; a point without a run history is left out. Reports are made in forked children for thousands."""
    moment = time.time() if now is None else now

    def reports(start: int, stop: int) -> list[tuple[int, Report]]:
        made = []
        with gc_paused():  # thousands of points' events and timelines (goodput.summary.gc_paused)
            for point, target in work[start:stop]:
                for h in histories(target, None):
                    made.append((point, slim(report(h.key, h.events, moment, detail), detail)))
        return made

    made = fanout.spread(len(work), reports)
    kept = {point for point, _ in made}
    return SweepReport(label, made, {p: v for p, v in values.items() if p in kept},
                       {p: v for p, v in shown.items() if p in kept})  # fmt: skip


def slim(r: Report, detail: bool) -> Report:
    """A point's report as a sweep's roll-up uses it: without `detail`, its timeline keeps its runs only (the
    segments are summed in its buckets already), which is what a forked child sends back (queries/fanout.py)."""
    return r if detail else replace(r, timeline=replace(r.timeline, segments=(), markers=()))


def reports_json(reports: list[Report]) -> dict[str, Any]:
    """`slurmgen report --json` and `Job.report()`: one job's report, or an array job's as {"tasks": [...]}."""
    if len(reports) == 1:
        return reports[0].to_json()
    return {"tasks": [r.to_json() for r in reports]}
