"""Requeue this job, the right way: by its own key, within its budgets, once, and recorded with its cause.

- The key is `<array_job>_<task>` for an array task, so one task is requeued and not the whole array
  (Lightning #15022); a plain job id otherwise.
- A running job is requeued with `scontrol requeue Incomplete`, which acts only while the job runs, so a late
  requeue never restarts a finished job. A job that Slurm is ending after a PreemptMode=CANCEL preemption is
  requeued with a plain `scontrol requeue`, which takes back a completing or finished job (scontrol(1);
  src/slurmctld/job_mgr.c `_job_requeue_op`: "we support requeue of done/exit/exiting jobs").
- Budgets (decided in slurmgen/interruption_signal.py, budget_refusal): preemption.max_requeues counts the
  requeues the job causes itself (its time limit, a failure, its own request); preemption.max_preemptions counts
  requeues after the scheduler preempted it (not the job's fault, so unlimited unless the spec says otherwise).
  Requeues made by someone else (an admin's `scontrol requeue`, a node failure) count against neither. The counts
  come from the job's run history (slurmgen.run_history), not from SLURM_RESTART_COUNT, which counts every kind
  alike.
- Inside a container (pyxis/enroot) there is no scontrol (pyxis #129): the task leaves a marker in the state
  directory and the batch shell, which runs outside the container, requeues when the step ends.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmgen import contract, interruption_signal, run_history
from slurmgen.atomic import write_text
from slurmgen.interruption_signal import budget_refusal
from slurmgen.job_context.context import JobContext

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.retry import Retry
    from slurmgen.slurm.view import SlurmView


@dataclass(frozen=True)
class RequeueOutcome:
    action: str  # "requeued", "batch-shell", "budget", "disabled", "not-running", "not-slurm", "failed"
    message: str


@dataclass(frozen=True)
class Budgets:
    max_requeues: int | None  # the job's own requeues; None: no limit
    max_preemptions: int | None  # requeues after a preemption; None: no limit

    @classmethod
    def of(cls, ctx: JobContext) -> Budgets:
        return cls(ctx.max_requeues, ctx.max_preemptions)

    def refusal(self, cause: str, counts: run_history.Counts) -> str | None:
        """Why a requeue for ``cause`` is over budget, or None when it may go ahead (slurmgen.interruption_signal)."""
        return budget_refusal(cause, counts, self.max_requeues, self.max_preemptions)

    def describe(self, cause: str, counts: run_history.Counts) -> str:
        """`requeue 2 of 5` for the message that announces a requeue."""
        if cause == run_history.PREEMPTION:
            limit, number = self.max_preemptions, counts.preemptions + 1
            return f"preemption {number} of {'no limit' if limit is None else limit}"
        limit, number = self.max_requeues, counts.own + 1
        return f"requeue {number} of {'no limit' if limit is None else limit}"


def signal_cause(ctx: JobContext, preempted: bool | None, now: float) -> str:
    """Why a requeue signal came (slurmgen.interruption_signal.signal_cause), from this job's start, limit and lead."""
    return interruption_signal.signal_cause(preempted, now, ctx.start_time, ctx.time_limit, ctx.lead_time)


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
    mapping: JobContext | Mapping[str, str] | None = None,
    state_dir: str | None = None,
    *,
    by: str = "rank0",
    which: Callable[[str], str | None] = shutil.which,
    client: SlurmClient | None = None,
    retry: Retry | None = None,
    history: run_history.History | None = None,
    before: SlurmView | None = None,
) -> RequeueOutcome:
    """Requeue the running job this process belongs to (from one process only: rank 0 or the batch shell).

    ``history`` and ``before`` are the run history and Slurm's view of the job that the caller read already for
    its own decision (read here when not given): one read of each per stop."""
    from slurmgen.slurm import view as slurm_view

    ctx = JobContext.of(os.environ if mapping is None else mapping)
    key = ctx.key
    if key is None:
        return RequeueOutcome("not-slurm", "not inside a Slurm job: nothing to requeue")
    budgets, counts = Budgets.of(ctx), (history or run_history.History.load(ctx.log_dir)).counts()
    refused = budgets.refusal(cause, counts)
    if refused is not None:
        record(ctx, by, run_history.REFUSED, cause=cause, why="budget")
        return RequeueOutcome("budget", f"not requeueing job {key} ({cause}): {refused}")
    state_dir = state_dir or ctx.state_dir or "."
    if cause == run_history.PREEMPTION and by != "batch-shell" and _continue_elsewhere(ctx, history):
        # A requeue would end PREEMPTED anyway on this Slurm (interruption_signal.slurm_ends_graced_preempted): the
        # batch shell submits a continuation job once the step has ended (batch/continuation.py).
        ask_batch_shell(state_dir, key, cause)
        return RequeueOutcome("batch-shell", f"asked the batch shell to continue job {key} in a new job ({cause}; "
                              "PreemptMode=CANCEL with a grace time ends a requeued job PREEMPTED)")  # fmt: skip
    if ctx.in_container or (client is None and which("scontrol") is None):
        ask_batch_shell(state_dir, key, cause)
        where = "inside a container" if ctx.in_container else "scontrol is not on PATH"
        return RequeueOutcome("batch-shell", f"asked the batch shell to requeue job {key} ({cause}; {where})")
    run = ctx.restart_count
    if before is None:
        before = slurm_view.look(key, client, retry)
    if before is not None and not before.running():
        # Requeued already (by Slurm's PreemptMode=REQUEUE, say) or ending: `requeue Incomplete` would be a silent
        # no-op, and claiming it would credit this run with a requeue it did not make.
        return RequeueOutcome("not-running", f"job {key} is {before.state_name} already; no requeue from here")
    outcome = _scontrol_requeue(key, cause, incomplete=True, client=client, retry=retry)
    if outcome.action == "failed" and by != "batch-shell":
        # Let the batch shell try once the step has ended; it runs outside any container.
        ask_batch_shell(state_dir, key, cause)
        return RequeueOutcome("batch-shell", f"{outcome.message}; asked the batch shell to requeue")
    if outcome.action != "requeued":
        if outcome.action == "disabled":
            record(ctx, by, run_history.REFUSED, cause=cause, why="disabled")
        return outcome
    after = slurm_view.look(key, client, retry)
    if after is not None and not after.requeued_since(run):
        return RequeueOutcome("not-running", f"job {key} was no longer running; the requeue had no effect")
    record(ctx, by, run_history.REQUEUE, cause=cause)
    return RequeueOutcome("requeued", f"requeue issued for job {key} ({cause}; {budgets.describe(cause, counts)})")


def _continue_elsewhere(ctx: JobContext, history: run_history.History | None) -> bool:
    """Does this site's Slurm end the job PREEMPTED even if requeued (the run's recorded site)?"""
    if not ctx.log_dir:
        return False
    site = (history or run_history.History.load(ctx.log_dir)).site(ctx.run)
    return interruption_signal.slurm_ends_graced_preempted(site)


def _scontrol_requeue(
    key: str, cause: str, *, incomplete: bool, client: SlurmClient | None, retry: Retry | None = None
) -> RequeueOutcome:
    """One requeue, retried while Slurm cannot be reached or does not answer (slurm/retry.py). Every
    failure is an outcome, never an exception: the caller leaves a marker or keeps the state."""
    from slurmgen.errors import SlurmgenError
    from slurmgen.slurm.client import JobPending, RequeueDisabled, SlurmClient
    from slurmgen.slurm.retry import DEFAULT, retried

    asker = client or SlurmClient(timeout=60)
    met: list[SlurmgenError] = []
    try:
        retried(lambda: asker.requeue(key, incomplete=incomplete), retry or DEFAULT, failed=met)
    except RequeueDisabled:
        return RequeueOutcome("disabled", f"job {key} was submitted with --no-requeue; not requeued")
    except JobPending:
        if met:  # a try that timed out took effect after all: the job is back in the queue
            return RequeueOutcome("requeued", f"requeue issued for job {key} ({cause}; after {len(met)} retries)")
        return RequeueOutcome("not-running", f"job {key} is already pending (requeued by someone else)")
    except SlurmgenError as exc:  # a time-out, an unreachable controller, Slurm's refusal: after the retries
        return RequeueOutcome("failed", f"scontrol requeue {key} failed ({exc})")
    return RequeueOutcome("requeued", f"requeue issued for job {key} ({cause})")


def requeue_ended_job(
    key: str,
    cause: str,
    ctx: JobContext,
    *,
    by: str,
    client: SlurmClient | None = None,
    retry: Retry | None = None,
    history: run_history.History | None = None,
) -> RequeueOutcome:
    """Requeue a job Slurm is ending (PreemptMode=CANCEL): a plain `scontrol requeue`, within the budgets."""
    budgets, counts = Budgets.of(ctx), (history or run_history.History.load(ctx.log_dir)).counts()
    refused = budgets.refusal(cause, counts)
    if refused is not None:
        record(ctx, by, run_history.REFUSED, cause=cause, why="budget")
        return RequeueOutcome("budget", f"not requeueing job {key} ({cause}): {refused}")
    outcome = _scontrol_requeue(key, cause, incomplete=False, client=client, retry=retry)
    if outcome.action == "requeued":
        record(ctx, by, run_history.REQUEUE, cause=cause, mode="CANCEL")
        return RequeueOutcome("requeued", f"{outcome.message.removesuffix(')')}; {budgets.describe(cause, counts)})")
    if outcome.action == "disabled":
        record(ctx, by, run_history.REFUSED, cause=cause, why="disabled")
    return outcome
