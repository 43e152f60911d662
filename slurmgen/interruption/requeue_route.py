"""Whether and how a requeue goes: why it is asked for (`signal_cause`), its budget, what the site's Slurm does by
itself, and the way it is made.

The one place where a requeue is refused over its budget (`route_requeue`, `budget_refusal`): slurmgen/requeue.py
asks here and carries the route out, for rank 0 and for the batch shell, while the job runs and after Slurm ended
it. What the site's Slurm does in a preemption's grace time comes in as `SiteFacts`, read by the caller from the
run's recorded site (its version parsed there, by slurmgen.slurm.ids): nothing here parses or asks.

Standard library and the run history's vocabulary only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from slurmgen import run_history
from slurmgen.interruption.states import Event, RequeueRoute

# How close to the end of the time limit a requeue signal counts as the limit's own warning: Slurm sends --signal
# up to 30 s before the lead time (PERIODIC_TIMEOUT, src/slurmctld/slurmctld.h), and our start time is the batch
# shell's, a second late at most.
TIME_LIMIT_SLACK = 90


def signal_cause(
    preempted: bool | None, now: float, start: float | None, limit: float | None, lead: float | None
) -> str:
    """Why a requeue signal came, for the rank and the batch shell alike. Slurm's PreemptTime is the authority
    (``preempted``; None when Slurm could not be asked). Within the lead time (and Slurm's slack) of the time limit
    it is the limit's own warning; any other is someone's request (`scancel --signal`, `slurmgen cancel --signal`)
    when Slurm says the job is not preempted; unasked, it is taken for a preemption."""
    if preempted:
        return run_history.PREEMPTION
    if start is not None and limit is not None and lead is not None and now >= start + limit - lead - TIME_LIMIT_SLACK:
        return run_history.TIME_LIMIT
    return run_history.REQUESTED if preempted is False else run_history.PREEMPTION


@dataclass(frozen=True)
class SiteFacts:
    """What this site's Slurm does on preemption, as recorded at the run's start (run-start's `site`; empty: Slurm
    could not be asked), with its version as (major, minor), parsed by the caller."""

    mode: str | None = None  # the partition's PreemptMode: REQUEUE, CANCEL, ...
    grace: int = 0  # GraceTime, seconds
    version: tuple[int, int] | None = None  # (24, 5) for 24.05.x; None when unknown

    @classmethod
    def of(cls, site: Mapping[str, Any], version: tuple[int, int] | None) -> SiteFacts:
        try:
            grace = int(site.get("grace") or 0)
        except (TypeError, ValueError):
            grace = 0
        mode = site.get("mode")
        return cls(mode if isinstance(mode, str) else None, grace, version)


def slurm_requeues_in_grace(site: SiteFacts) -> bool:
    """Does Slurm itself requeue a job of this site that ends during its preemption grace time? Since 24.05
    (SchedMD commit a689104d15, bug 16263: src/slurmctld/proc_req.c) a batch job that completes after the grace
    time's signal, in a PreemptMode=REQUEUE partition, is treated as preempted and requeued. Before, such a job
    just completed, and slurmgen had to requeue it. A requeue of our own during the grace would now be one too
    many: `scontrol requeue` leaves Slurm's grace mark on the job (only a completion clears it), so the next
    run, ending, is requeued once more (seen on 24.11: a completed job ran a third time from scratch)."""
    return site.mode == "REQUEUE" and site.version is not None and site.version >= (24, 5)


def slurm_ends_graced_preempted(site: SiteFacts) -> bool:
    """Does this site's Slurm end a job PREEMPTED, whatever its run does, once a PreemptMode=CANCEL preemption
    with a grace time has begun? Since 24.05 (commit a689104d15) `_job_complete` (src/slurmctld/job_mgr.c) ends
    every job carrying GRACE_PREEMPT as PREEMPTED; the flag is set as the grace starts (src/interfaces/preempt.c,
    `_job_check_grace_internal`) and `scontrol requeue` does not clear it, so a requeued run that finishes the work
    ends PREEMPTED too. The work then goes on in a continuation job (batch/continuation.py)."""
    return site.mode == "CANCEL" and site.grace > 0 and site.version is not None and site.version >= (24, 5)


def slurm_requeue_cause(preempt_time_seen: bool, mode: str | None) -> str:
    """Why Slurm requeued a job that did not ask. While Slurm requeues a preempted job its record no longer shows
    PreemptTime (src/scontrol/info_job.c prints it only while preemptable_time is set), so a requeue of a job in a
    PreemptMode=REQUEUE partition is taken for a preemption; anywhere else it is someone else's doing (an admin's
    scontrol requeue, a node failure)."""
    return run_history.PREEMPTION if preempt_time_seen or mode == "REQUEUE" else run_history.EXTERNAL


def budget_refusal(
    cause: str, counts: run_history.Counts, max_requeues: int | None, max_preemptions: int | None
) -> str | None:
    """Why a requeue for ``cause`` is over budget, or None when it may go ahead. preemption.max_requeues counts the
    requeues the job causes itself; preemption.max_preemptions those after a preemption (None: no limit)."""
    if cause == run_history.PREEMPTION:
        used, limit, field = counts.preemptions, max_preemptions, "preemption.max_preemptions"
    else:
        used, limit, field = counts.own, max_requeues, "preemption.max_requeues"
    if limit is None or used < limit:
        return None
    kind = "preemption" if cause == run_history.PREEMPTION else "requeue"
    return f"its {kind} budget is used up ({used} of {limit}, {field})"


@dataclass(frozen=True)
class RequeueFacts:
    """A requeue someone asks for (rank 0, or the batch shell), with what is known before anything runs."""

    EVENT: ClassVar[Event] = Event.REQUEUE
    cause: str  # run_history's cause: preemption, time-limit, requested, failure
    key: str | None  # the job's key; None outside a Slurm job
    counts: run_history.Counts  # the job's requeues so far, by kind (the run history)
    max_requeues: int | None  # preemption.max_requeues; None: no limit
    max_preemptions: int | None  # preemption.max_preemptions; None: no limit
    by_batch_shell: bool  # the batch shell asks: it runs outside any container and has no one to leave a marker to
    ending: bool = False  # Slurm is ending the job (PreemptMode=CANCEL): only a plain requeue takes it back
    continue_elsewhere: bool = False  # slurm_ends_graced_preempted for this run's site
    in_container: bool = False
    has_scontrol: bool = True


@dataclass(frozen=True)
class RequeuePlan:
    route: RequeueRoute
    refusal: str | None = None  # RequeueRoute.REFUSED: the one line that says why
    continues: bool = False  # ASK_BATCH_SHELL: the batch shell continues the work in a new job (not a requeue)


def route_requeue(facts: RequeueFacts) -> RequeuePlan:
    """The way a requeue goes. The budget first: a refused requeue is refused whoever asks and however it would
    have been made. A job Slurm is ending takes a plain `scontrol requeue`; a preemption where Slurm would end a
    requeued run PREEMPTED anyway is continued in a new job by the batch shell; where scontrol is missing (inside a
    container: pyxis #129) the batch shell requeues after the step; else `scontrol requeue Incomplete`."""
    if facts.key is None:
        return RequeuePlan(RequeueRoute.NOT_SLURM)
    refused = budget_refusal(facts.cause, facts.counts, facts.max_requeues, facts.max_preemptions)
    if refused is not None:
        return RequeuePlan(RequeueRoute.REFUSED, f"not requeueing job {facts.key} ({facts.cause}): {refused}")
    if facts.ending:
        return RequeuePlan(RequeueRoute.SCONTROL_ENDED)
    if facts.cause == run_history.PREEMPTION and not facts.by_batch_shell and facts.continue_elsewhere:
        return RequeuePlan(RequeueRoute.ASK_BATCH_SHELL, continues=True)
    if facts.in_container or not facts.has_scontrol:
        return RequeuePlan(RequeueRoute.ASK_BATCH_SHELL)
    return RequeuePlan(RequeueRoute.SCONTROL_RUNNING)
