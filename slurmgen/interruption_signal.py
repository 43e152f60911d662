"""What to do when a signal interrupts a running step: one pure decision per question, tested as a table.

The end of a run and a crash inside the allocation are decided in slurmgen/interruption.py; this is its other half,
for the moments while the step runs: why a requeue signal came (`signal_cause`), where the batch shell sends the
preemption signal (`preemption_route`), when Slurm ends the run anyway (`window_end`), whether a requeue is within
its budget (`budget_refusal`), what the site's Slurm does by itself (`slurm_requeues_in_grace`,
`slurm_requeue_cause`, `slurm_ends_graced_preempted`), rank 0's stop (`decide_stop`), the supervisor's routing
(`task_route`) and how long the rendered script holds an early preemption signal (`hold_limit`). The executors (the
batch shell's `signal`, requeue, Preemption) gather the facts and carry out the answer; nothing here runs a command,
reads a file or a clock (tests/test_interruption_signal.py).

Standard library and the run history's vocabulary only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmgen import contract, exit_codes, run_history

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


def preemption_route(handler: str, program_announced: bool) -> str:
    """What the preemption signal calls for in the batch shell: "forward" (the program acts on it), "stop" (the
    batch shell stops the step and requeues), or "wait" (auto, and the program has not said yet whether it takes
    part: forward, and stop if it does not say soon)."""
    if handler in (contract.HANDLER_RUNTIME, contract.HANDLER_PROGRAM):
        return "forward"
    if handler == contract.HANDLER_AUTO:
        return "forward" if program_announced else "wait"
    return "stop"


def window_end(cause: str, preempt_end: float | None, start: float | None, limit: float | None) -> float | None:
    """When Slurm ends this run anyway (epoch seconds): a preemption's grace end (``preempt_end``: Slurm's EndTime
    while it runs), or the time limit; None when no one will (a request)."""
    if cause == run_history.PREEMPTION:
        return preempt_end
    if cause == run_history.TIME_LIMIT and start is not None and limit is not None:
        return start + limit
    return None


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


def slurm_requeues_in_grace(site: Mapping[str, Any]) -> bool:
    """Does Slurm itself requeue a job of this site that ends during its preemption grace time? Since 24.05
    (SchedMD commit a689104d15, bug 16263: src/slurmctld/proc_req.c) a batch job that completes after the grace
    time's signal, in a PreemptMode=REQUEUE partition, is treated as preempted and requeued. Before, such a job
    just completed, and slurmgen had to requeue it. A requeue of our own during the grace would now be one too
    many: `scontrol requeue` leaves Slurm's grace mark on the job (only a completion clears it), so the next
    run, ending, is requeued once more (seen on 24.11: a completed job ran a third time from scratch)."""
    from slurmgen.slurm.site_config import version_tuple

    known = version_tuple(site.get("version"))
    return site.get("mode") == "REQUEUE" and known is not None and known >= (24, 5)


def slurm_ends_graced_preempted(site: Mapping[str, Any]) -> bool:
    """Does this site's Slurm end a job PREEMPTED, whatever its run does, once a PreemptMode=CANCEL preemption
    with a grace time has begun? Since 24.05 (commit a689104d15) `_job_complete` (src/slurmctld/job_mgr.c) ends
    every job carrying GRACE_PREEMPT as PREEMPTED; the flag is set as the grace starts (src/interfaces/preempt.c,
    `_job_check_grace_internal`) and `scontrol requeue` does not clear it, so a requeued run that finishes the work
    ends PREEMPTED too. The work then goes on in a continuation job (batch/continuation.py)."""
    from slurmgen.slurm.site_config import version_tuple

    known = version_tuple(site.get("version"))
    try:
        grace = int(site.get("grace") or 0)
    except (TypeError, ValueError):
        grace = 0
    return site.get("mode") == "CANCEL" and grace > 0 and known is not None and known >= (24, 5)


def slurm_requeue_cause(preempt_time_seen: bool, mode: str | None) -> str:
    """Why Slurm requeued a job that did not ask. While Slurm requeues a preempted job its record no longer shows
    PreemptTime (src/scontrol/info_job.c prints it only while preemptable_time is set), so a requeue of a job in a
    PreemptMode=REQUEUE partition is taken for a preemption; anywhere else it is someone else's doing (an admin's
    scontrol requeue, a node failure)."""
    return run_history.PREEMPTION if preempt_time_seen or mode == "REQUEUE" else run_history.EXTERNAL


@dataclass(frozen=True)
class StopFacts:
    """Rank 0's stop (Preemption.save_and_exit), as every rank learns it."""

    asked_requeue: bool  # the signal or the program asked for a requeue
    terminated: bool  # SIGTERM: Slurm (or someone) is ending the job
    requeue_enabled: bool  # preemption is on (or the program runs outside slurmgen's script)
    preempted: bool  # Slurm shows PreemptTime (or requeued the run for a preemption)
    running: bool  # Slurm shows the job running
    slurm_requeues: bool  # the site's Slurm requeues a job that ends in its grace time (24.05 and later)


@dataclass(frozen=True)
class StopPlan:
    requeue: bool  # rank 0 requeues the job once the state is durable
    code: int  # the exit code, unless the requeue is refused over budget (EXIT_REQUEUE_BUDGET)
    slurm_requeues: bool  # leave the requeue to Slurm (say so)


def decide_stop(facts: StopFacts) -> StopPlan:
    """Whether rank 0 requeues at its stop, and the exit code of every rank."""
    requeue = facts.asked_requeue and facts.requeue_enabled
    leave = False
    if facts.preempted and facts.running and facts.requeue_enabled:
        # Preempted with a grace time: Slurm before 24.05 does not requeue a job that ends before its grace does
        # (and with no user signal, SIGTERM came to the tasks only): requeue once the state is durable. Since 24.05
        # a REQUEUE partition requeues a job that ends in its grace itself: leave it to Slurm.
        requeue, leave = not facts.slurm_requeues, facts.slurm_requeues
    terminated = facts.terminated and not requeue and not facts.preempted
    return StopPlan(requeue, exit_codes.EXIT_TERMINATED if terminated else 0, leave)


@dataclass(frozen=True)
class TaskRoute:
    forward: bool  # the task's supervisor sends the signal on to its program (it did not reach it)
    owed: bool  # a preemption signal the program cannot take yet: watched until it has a handler


def task_route(
    *, preemption_signal: bool, handler: str, program_catches: bool, hooked: bool, stepwide: bool, recent: bool
) -> TaskRoute:
    """Where a signal that reached a task's supervisor goes (task/supervisor.py executes it). A step-wide one
    (slurmstepd signalled every process) reached the program already, and a repeat within moments is the same one;
    under handler requeue the preemption signal is the batch shell's business (it stops the step with SIGTERM);
    under handler program, one the program has no handler for yet is owed to it, and only a hooked program (which
    keeps it blocked until its handler is in) is sent it now."""
    if preemption_signal and handler == contract.HANDLER_REQUEUE:
        return TaskRoute(False, False)
    owed = preemption_signal and handler == contract.HANDLER_PROGRAM and not program_catches
    if owed and not hooked:
        return TaskRoute(False, True)  # discarded by the program's SIG_IGN: sent again once it has a handler
    return TaskRoute(not stepwide and not recent, owed)


# --- The template's hold window -----------------------------------------------------------------------------

# Seconds the batch shell holds the preemption signal after starting the step: the runtime entry point blocks
# it within a fraction of a second (Python's start-up), and until then the default action would kill a task.
STEP_GRACE = 3
# An early preemption signal is held until every task of the step says it has blocked it (a file each, see
# slurmgen.task.launch.say_ready), which takes longer than STEP_GRACE where the interpreter starts slowly (a
# venv on NFS, cold caches). The hold never lasts more than this part of the lead time: the program needs the
# rest to save. At least STEP_GRACE, as before, where a task's file cannot be seen.
HOLD_SHARE = 4


def hold_limit(lead_time: int) -> int:
    """Seconds after the step's start past which an early preemption signal is delivered whatever the tasks say."""
    return max(STEP_GRACE, lead_time // HOLD_SHARE)
