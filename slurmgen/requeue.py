"""Requeue this job, the right way: by its own key, within its budgets, once, and recorded with its cause.

- The key is `<array_job>_<task>` for an array task, so one task is requeued and not the whole array
  (Lightning #15022); a plain job id otherwise.
- A running job is requeued with `scontrol requeue Incomplete`, which acts only while the job runs, so a late
  requeue never restarts a finished job. A job that Slurm is ending after a PreemptMode=CANCEL preemption is
  requeued with a plain `scontrol requeue`, which takes back a completing or finished job (scontrol(1);
  src/slurmctld/job_mgr.c `_job_requeue_op`: "we support requeue of done/exit/exiting jobs").
- Budgets (decided once, in the interruption policy: slurmgen/interruption/ending.py, which also says the
  route this module carries out): preemption.max_requeues counts the
  requeues the job causes itself (its time limit, a failure, its own request); preemption.max_preemptions counts
  requeues after the scheduler preempted it (not the job's fault, so unlimited unless the spec says otherwise).
  Requeues made by someone else (an admin's `scontrol requeue`, a node failure) count against neither. The counts
  come from the job's run history (slurmgen.run_history), not from SLURM_RESTART_COUNT, which counts every kind
  alike.
- Inside a container (pyxis/enroot) there is no scontrol (pyxis #129): the task leaves a marker in the state
  directory and the batch shell, which runs outside the container, requeues when the step ends.

Before and after a requeue, and when a stop begins, the stop path asks what Slurm says about this job
(`look`, below the requeue), and every Slurm call of the stop path is retried in one place (`retried`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from slurmgen import contract, run_history
from slurmgen.atomic import write_text
from slurmgen.errors import SchedulerError, SchedulerMissing, SlurmgenError
from slurmgen.interruption import decide
from slurmgen.interruption.ending import (
    RequeueFacts,
    RequeuePlan,
    SiteFacts,
    SlurmSays,
    slurm_ends_graced_preempted,
)
from slurmgen.interruption.ending import signal_cause as _signal_cause
from slurmgen.interruption.states import RequeueResult, RequeueRoute
from slurmgen.job_context.context import JobContext
from slurmgen.slurm.ids import JobState, version_tuple

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
    """Why a requeue signal came (slurmgen.interruption.signal_cause), from this job's start, limit and lead."""
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
            # A requeue would end PREEMPTED anyway on this Slurm (interruption.slurm_ends_graced_preempted): the
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
    """One requeue, retried while Slurm cannot be reached or does not answer (`retried`, below). Every
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


# --- what Slurm says about this job right now ---------------------------------------------------------
#
# Is the job being preempted, has it been requeued already? A signal does not say why it came. SIGTERM is the time
# limit, `scancel`, a requeue, or a preemption; the `--signal` user signal is the time limit's warning or (with the
# site's send_user_signal) a preemption. Slurm records a preemption on the job: `scontrol show job` shows
# `PreemptTime` from the moment the job is selected until it is requeued (src/slurmctld/job_mgr.c clears preempt_time
# when a job is requeued). During a grace time the job is still RUNNING (its EndTime moved to the preemption plus
# GraceTime); with PreemptMode=REQUEUE and no grace Slurm has requeued it already (Restarts one higher, COMPLETING or
# PENDING); with PreemptMode=CANCEL it is COMPLETING and then PREEMPTED, not requeued.
#
# One `scontrol show job` (a slurmctld RPC, some milliseconds), asked by rank 0 when the ranks agree to stop and by
# the batch shell when a signal reaches it and when the step ends.
#
# Slurm calls in the stop path are retried here, in one place (`retried`, which the requeue above shares): a stop must
# not turn one lost RPC into a lost job. slurmctld can be briefly unreachable or slow: a failover, a restart, an RPC
# storm ("Socket timed out on send/recv operation", "Unable to contact slurm controller (connect failure)";
# scontrol(1) gives up after MessageTimeout, slurm.conf(5)). Each such call gets a few tries with growing pauses. What
# is no fault of the moment (an unknown job, --no-requeue, a pending job, scontrol not installed) is not retried:
# another try would answer the same. A call that still fails after its tries raises as before; the callers turn that
# into "unknown" (keep the state, say so) or a marker for the batch shell, never an escape.

# Slurm's own states and their meaning for a job that is stopping (slurmgen.slurm.ids.JobState).
_STILL_RUNNING = frozenset({JobState.RUNNING, JobState.SUSPENDED})


@dataclass(frozen=True)
class SlurmView:
    state: JobState
    state_name: str
    restarts: int  # Restarts=: how often the job was requeued so far (Slurm's count)
    preempt_time: datetime | None
    end_time: datetime | None
    partition: str | None

    def preempted(self) -> bool:
        return self.preempt_time is not None

    def running(self) -> bool:
        return self.state in _STILL_RUNNING

    def requeued_since(self, restart_count: int) -> bool:
        """Requeued after the run that has SLURM_RESTART_COUNT ``restart_count`` started (by anyone)."""
        return self.restarts > restart_count

    def mode(self, restart_count: int) -> str | None:
        """The PreemptMode the job's state shows, when it is preempted: REQUEUE (Slurm requeued it), CANCEL (it
        is ending without a requeue), or None (still running in its grace time: either may follow)."""
        if not self.preempted():
            return None
        if self.requeued_since(restart_count):
            return "REQUEUE"
        return None if self.running() else "CANCEL"

    def says(self, restart_count: int) -> SlurmSays:
        """This view as the interruption decision takes it (slurmgen/interruption/)."""
        running, requeued, mode = self.running(), self.requeued_since(restart_count), self.mode(restart_count)
        return SlurmSays(running, self.preempted(), requeued, mode, self.state_name)


def look(key: str, client: SlurmClient | None = None, retry: Retry | None = None) -> SlurmView | None:
    """This job as slurmctld sees it; None when it cannot be asked (no scontrol here, inside a container, no
    answer in time, after the retries of `retried`) or does not know the job."""
    from slurmgen.slurm.client import SlurmClient

    asker = client or SlurmClient(timeout=10.0)
    try:
        info = retried(lambda: asker.show_job(key), retry or DEFAULT)
    except SlurmgenError:
        return None
    if info is None:
        return None
    return SlurmView(info.state, info.state_name, info.restarts, info.preempt_time, info.end_time, info.partition)


# --- the retry of every stop-path call -------------------------------------------------------------------

# What SlurmClient says when no controller answers (slurm/client.py _UNREACHABLE): the controller may be back in
# a moment, unlike a client command that is not installed.
_UNREACHABLE_WORDS = "no Slurm controller reachable"


@dataclass(frozen=True)
class Retry:
    """How often and with which pauses (seconds) a stop-path Slurm call is tried; ``sleep`` is injectable."""

    tries: int = 3
    pauses: tuple[float, ...] = (1.0, 3.0)
    sleep: Callable[[float], None] = time.sleep

    def pause(self, attempt: int) -> float:
        """The pause after the failed try number ``attempt`` (0-based): the last pause repeats."""
        return self.pauses[min(attempt, len(self.pauses) - 1)] if self.pauses else 0.0


DEFAULT = Retry()


def transient(error: SlurmgenError) -> bool:
    """Could the same call succeed a moment later? A time-out, an unreachable controller, or a failure Slurm gave
    no known meaning to (slurm/client.py maps the known ones to their own classes, which are final)."""
    if isinstance(error, SchedulerMissing):
        return _UNREACHABLE_WORDS in str(error)
    from slurmgen.slurm.client import SchedulerTimeout

    return type(error) in (SchedulerError, SchedulerTimeout)


T = TypeVar("T")


def retried(call: Callable[[], T], retry: Retry = DEFAULT, *, failed: list[SlurmgenError] | None = None) -> T:
    """``call()``, tried again after a transient failure, up to ``retry.tries`` times; the last error is raised.
    ``failed`` collects the transient errors met on the way (a timed-out requeue may have taken effect)."""
    attempt = 0
    while True:
        try:
            return call()
        except SlurmgenError as error:
            attempt += 1
            if not transient(error) or attempt >= retry.tries:
                raise
            if failed is not None:
                failed.append(error)
            retry.sleep(retry.pause(attempt - 1))
