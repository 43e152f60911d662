"""Requeue this job, the right way: by its own key, within its budgets, once, and recorded with its cause.

- The key is `<array_job>_<task>` for an array task, so one task is requeued and not the whole array
  (Lightning #15022); a plain job id otherwise.
- A running job is requeued with `scontrol requeue Incomplete`, which acts only while the job runs, so a late
  requeue never restarts a finished job. A job that Slurm is ending after a PreemptMode=CANCEL preemption is
  requeued with a plain `scontrol requeue`, which takes back a completing or finished job (scontrol(1);
  src/slurmctld/job_mgr.c `_job_requeue_op`: "we support requeue of done/exit/exiting jobs").
- Budgets (decided once, in the interruption policy: slurmgen/interruption/requeue_route.py, which also says
  the route this module carries out): preemption.max_requeues counts the
  requeues the job causes itself (its time limit, a failure, its own request); preemption.max_preemptions counts
  requeues after the scheduler preempted it (not the job's fault, so unlimited unless the spec says otherwise).
  Requeues made by someone else (an admin's `scontrol requeue`, a node failure) count against neither. The counts
  come from the job's run history (slurmgen.run_history), not from SLURM_RESTART_COUNT, which counts every kind
  alike.
- Inside a container (pyxis/enroot) there is no scontrol (pyxis #129): the task leaves a marker in the state
  directory and the batch shell, which runs outside the container, requeues when the step ends.

Before and after a requeue the requeue asks what Slurm says about this job (slurmgen.slurm.view, `look`), and its
`scontrol requeue` is retried like every Slurm call of the stop path (slurmgen.slurm.retry, `retried`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmgen import contract, run_history
from slurmgen.atomic import write_text
from slurmgen.errors import SlurmgenError
from slurmgen.interruption import decide
from slurmgen.interruption.requeue_route import RequeueFacts, RequeuePlan, SiteFacts, slurm_ends_graced_preempted
from slurmgen.interruption.requeue_route import signal_cause as _signal_cause
from slurmgen.interruption.states import RequeueResult, RequeueRoute
from slurmgen.job_context.context import JobContext
from slurmgen.slurm.ids import version_tuple
from slurmgen.slurm.retry import DEFAULT, Retry, retried
from slurmgen.slurm.view import SlurmView, look

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient


@dataclass(frozen=True)
class RequeueOutcome:
    action: RequeueResult
    message: str


@dataclass(frozen=True)
class Budgets:
    max_requeues: int | None  # the job's own requeues; None: no limit
    max_preemptions: int | None  # requeues after a preemption; None: no limit

    @classmethod
    def of(cls, ctx: JobContext) -> Budgets:
        return cls(ctx.max_requeues, ctx.max_preemptions)

    def describe(self, cause: str, counts: run_history.Counts) -> str:
        """`requeue 2 of 5` for the message that announces a requeue."""
        if cause == run_history.PREEMPTION:
            limit, number = self.max_preemptions, counts.preemptions + 1
            return f"preemption {number} of {'no limit' if limit is None else limit}"
        limit, number = self.max_requeues, counts.own + 1
        return f"requeue {number} of {'no limit' if limit is None else limit}"


def signal_cause(ctx: JobContext, preempted: bool | None, now: float) -> str:
    """Why a requeue signal came (interruption/requeue_route.py), from this job's start, limit and lead."""
    return _signal_cause(preempted, now, ctx.start_time, ctx.time_limit, ctx.lead_time)


def site_facts(history: run_history.History, run: int) -> SiteFacts:
    """What the site's Slurm does on preemption, as the batch shell recorded it at ``run``'s start (its version
    parsed here, by slurm/ids.py, so that the policy parses nothing)."""
    site = history.site(run)
    return SiteFacts.of(site, version_tuple(site.get("version")))


def _route(
    ctx: JobContext,
    cause: str,
    history: run_history.History,
    *,
    by: str,
    ending: bool,
    has_scontrol: bool = True,
    site: SiteFacts | None = None,
) -> RequeuePlan:
    """Ask the policy which way this requeue goes (its budget first: refused once, there, for every caller).
    ``site``: this run's site facts when the caller has them already (else read from ``history``)."""
    if site is None and ctx.log_dir:
        site = site_facts(history, ctx.run)
    return decide(
        RequeueFacts(
            cause=cause,
            key=ctx.key,
            counts=history.counts(),
            max_requeues=ctx.max_requeues,
            max_preemptions=ctx.max_preemptions,
            by_batch_shell=by == "batch-shell",
            ending=ending,
            continue_elsewhere=site is not None and slurm_ends_graced_preempted(site),
            in_container=ctx.in_container,
            has_scontrol=has_scontrol,
        )
    )


def _refused(ctx: JobContext, by: str, cause: str, plan: RequeuePlan) -> RequeueOutcome:
    """Carry out a refusal: record it, say why (the policy's line)."""
    record(ctx, by, run_history.REFUSED, cause=cause, why="budget")
    return RequeueOutcome(RequeueResult.BUDGET, plan.refusal or "not requeued: over budget")


def record(ctx: JobContext, writer: str, event: str, **fields: object) -> None:
    """One run-history event for this run (nothing outside slurmgen's script, which exports the log dir)."""
    if ctx.log_dir:
        run_history.append(ctx.log_dir, writer, event, ctx.run, time.time(), **fields)


def ask_batch_shell(state_dir: str, key: str, cause: str) -> None:
    """Leave the marker the batch shell looks for after the step (written atomically)."""
    os.makedirs(state_dir, exist_ok=True)
    write_text(os.path.join(state_dir, contract.requeue_marker_name(key)), cause + "\n")


def requeue_this_job(
    cause: str,
    ctx: JobContext,
    state_dir: str | None = None,
    *,
    by: str = "rank0",
    which: Callable[[str], str | None] = shutil.which,
    client: SlurmClient | None = None,
    retry: Retry | None = None,
    history: run_history.History | None = None,
    before: SlurmView | None = None,
    site: SiteFacts | None = None,
) -> RequeueOutcome:
    """Requeue the running job this process belongs to (from one process only: rank 0 or the batch shell).

    ``history``, ``before`` and ``site`` are the run history, Slurm's view of the job and the site's facts that the
    caller read already for its own decision (read here when not given): one read of each per stop."""
    history = history or run_history.History.load(ctx.log_dir)
    scontrol = client is not None or bool(which("scontrol"))
    plan = _route(ctx, cause, history, by=by, ending=False, has_scontrol=scontrol, site=site)
    key, counts, budgets = ctx.key, history.counts(), Budgets.of(ctx)
    if plan.route is RequeueRoute.NOT_SLURM or key is None:
        return RequeueOutcome(RequeueResult.NOT_SLURM, "not inside a Slurm job: nothing to requeue")
    if plan.route is RequeueRoute.REFUSED:
        return _refused(ctx, by, cause, plan)
    state_dir = state_dir or ctx.state_dir or "."
    if plan.route is RequeueRoute.ASK_BATCH_SHELL:
        ask_batch_shell(state_dir, key, cause)
        if plan.continues:
            # A requeue would end PREEMPTED anyway on this Slurm (requeue_route.slurm_ends_graced_preempted): the
            # batch shell submits a continuation job once the step has ended (batch/continuation.py).
            said = f"asked the batch shell to continue job {key} in a new job ({cause}; PreemptMode=CANCEL with a " \
                   "grace time ends a requeued job PREEMPTED)"  # fmt: skip
            return RequeueOutcome(RequeueResult.BATCH_SHELL, said)
        where = "inside a container" if ctx.in_container else "scontrol is not on PATH"
        return RequeueOutcome(
            RequeueResult.BATCH_SHELL, f"asked the batch shell to requeue job {key} ({cause}; {where})"
        )
    if before is None:
        before = look(key, client, retry)
    if before is not None and not before.running():
        # Requeued already (by Slurm's PreemptMode=REQUEUE, say) or ending: `requeue Incomplete` would be a silent
        # no-op, and claiming it would credit this run with a requeue it did not make.
        return RequeueOutcome(
            RequeueResult.NOT_RUNNING, f"job {key} is {before.state_name} already; no requeue from here"
        )
    outcome = _scontrol_requeue(key, cause, incomplete=True, client=client, retry=retry)
    if outcome.action is RequeueResult.FAILED and by != "batch-shell":
        # Let the batch shell try once the step has ended; it runs outside any container.
        ask_batch_shell(state_dir, key, cause)
        return RequeueOutcome(RequeueResult.BATCH_SHELL, f"{outcome.message}; asked the batch shell to requeue")
    if outcome.action is not RequeueResult.REQUEUED:
        if outcome.action is RequeueResult.DISABLED:
            record(ctx, by, run_history.REFUSED, cause=cause, why="disabled")
        return outcome
    after = look(key, client, retry)
    if after is not None and not after.requeued_since(ctx.restart_count):
        return RequeueOutcome(RequeueResult.NOT_RUNNING, f"job {key} was no longer running; the requeue had no effect")
    record(ctx, by, run_history.REQUEUE, cause=cause)
    return RequeueOutcome(
        RequeueResult.REQUEUED, f"requeue issued for job {key} ({cause}; {budgets.describe(cause, counts)})"
    )


def _scontrol_requeue(
    key: str, cause: str, *, incomplete: bool, client: SlurmClient | None, retry: Retry | None = None
) -> RequeueOutcome:
    """One requeue, retried while Slurm cannot be reached or does not answer (slurmgen.slurm.retry, `retried`). Every
    failure is an outcome, never an exception: the caller leaves a marker or keeps the state."""
    from slurmgen.slurm.client import JobPending, RequeueDisabled, SlurmClient

    asker = client or SlurmClient(timeout=60)
    met: list[SlurmgenError] = []
    try:
        retried(lambda: asker.requeue(key, incomplete=incomplete), retry or DEFAULT, failed=met)
    except RequeueDisabled:
        return RequeueOutcome(RequeueResult.DISABLED, f"job {key} was submitted with --no-requeue; not requeued")
    except JobPending:
        if met:  # a try that timed out took effect after all: the job is back in the queue
            return RequeueOutcome(
                RequeueResult.REQUEUED, f"requeue issued for job {key} ({cause}; after {len(met)} retries)"
            )
        return RequeueOutcome(RequeueResult.NOT_RUNNING, f"job {key} is already pending (requeued by someone else)")
    except SlurmgenError as exc:  # a time-out, an unreachable controller, Slurm's refusal: after the retries
        return RequeueOutcome(RequeueResult.FAILED, f"scontrol requeue {key} failed ({exc})")
    return RequeueOutcome(RequeueResult.REQUEUED, f"requeue issued for job {key} ({cause})")


def requeue_ended_job(
    key: str,
    cause: str,
    ctx: JobContext,
    *,
    by: str,
    client: SlurmClient | None = None,
    retry: Retry | None = None,
    history: run_history.History | None = None,
    site: SiteFacts | None = None,
) -> RequeueOutcome:
    """Requeue a job Slurm is ending (PreemptMode=CANCEL): a plain `scontrol requeue`, within the budgets."""
    history = history or run_history.History.load(ctx.log_dir)
    plan = _route(ctx, cause, history, by=by, ending=True, site=site)
    if plan.route is RequeueRoute.REFUSED:
        return _refused(ctx, by, cause, plan)
    outcome = _scontrol_requeue(key, cause, incomplete=False, client=client, retry=retry)
    if outcome.action is RequeueResult.REQUEUED:
        record(ctx, by, run_history.REQUEUE, cause=cause, mode="CANCEL")
        message = f"{outcome.message.removesuffix(')')}; {Budgets.of(ctx).describe(cause, history.counts())})"
        return RequeueOutcome(RequeueResult.REQUEUED, message)
    if outcome.action is RequeueResult.DISABLED:
        record(ctx, by, run_history.REFUSED, cause=cause, why="disabled")
    return outcome
