"""The decisions taken while a run is under way: before a start of the step (what TERM and USR2 mean then), why a
requeue signal came (`signal_cause`), where the batch shell sends the preemption signal (`preemption_route`), when
Slurm ends the run anyway (`window_end`), rank 0's stop (`decide_stop`) and the supervisor's routing (`task_route`).
The executors (the batch shell's helper, Preemption, each task's supervisor) gather the facts and carry out the
answer; nothing here runs a command, reads a file or a clock. How long the rendered script holds an early
preemption signal (`hold_limit`) is hold.py's.

Standard library and the run history's vocabulary only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from slurmgen import contract, exit_codes, run_history
from slurmgen.interruption.states import BeforeStep, Event, Phase, SignalRoute


@dataclass(frozen=True)
class PreemptionSignalFacts:
    """The spec's preemption signal reached the batch shell while the step runs."""

    EVENT: ClassVar[Event] = Event.PREEMPTION_SIGNAL
    handler: str  # preemption.handler
    program_announced: bool  # rank 0 constructed Preemption in this run (the run history says so)


def preemption_route(facts: PreemptionSignalFacts) -> SignalRoute:
    """What the preemption signal calls for in the batch shell: FORWARD (the program acts on it), STOP (the batch
    shell stops the step and requeues), or WAIT (auto, and the program has not said yet whether it takes part:
    forward, and stop if it does not say soon)."""
    if facts.handler in (contract.HANDLER_RUNTIME, contract.HANDLER_PROGRAM):
        return SignalRoute.FORWARD
    if facts.handler == contract.HANDLER_AUTO:
        return SignalRoute.FORWARD if facts.program_announced else SignalRoute.WAIT
    return SignalRoute.STOP


def window_end(cause: str, preempt_end: float | None, start: float | None, limit: float | None) -> float | None:
    """When Slurm ends this run anyway (epoch seconds): a preemption's grace end (``preempt_end``: Slurm's EndTime
    while it runs), or the time limit; None when no one will (a request)."""
    if cause == run_history.PREEMPTION:
        return preempt_end
    if cause == run_history.TIME_LIMIT and start is not None and limit is not None:
        return start + limit
    return None


@dataclass(frozen=True)
class SignalMeaning:
    """What rank 0's Preemption does when a signal reaches the program (every rank records it; rank 0 acts)."""

    requeue: bool  # ask for a requeue once the state is durable
    save: bool  # save the state first
    terminated: bool  # Slurm (or someone) is ending the job: exit with EXIT_TERMINATED unless requeued


def signal_meanings(preempt_signal: str, requeue_enabled: bool) -> dict[str, SignalMeaning]:
    """The signals the program's Preemption takes, by name, and what each means; every one ends in an exit. The
    preemption signal saves and requeues (only saves when preemption is off: no requeue to ask for); TERM
    (contract.SAVE_EXIT_SIGNAL: the time limit, scancel, a preemption without a user signal) saves and exits; USR2
    (contract.CLEAN_EXIT_SIGNAL) exits cleanly without a save."""
    return {
        preempt_signal: SignalMeaning(requeue=requeue_enabled, save=True, terminated=False),
        contract.SAVE_EXIT_SIGNAL: SignalMeaning(requeue=False, save=True, terminated=True),
        contract.CLEAN_EXIT_SIGNAL: SignalMeaning(requeue=False, save=False, terminated=False),
    }


@dataclass(frozen=True)
class StopFacts:
    """Rank 0's stop (Preemption.save_and_exit), as every rank learns it."""

    EVENT: ClassVar[Event] = Event.STOP
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


@dataclass(frozen=True)
class TaskSignalFacts:
    """A signal reached a task's supervisor."""

    EVENT: ClassVar[Event] = Event.TASK_SIGNAL
    preemption_signal: bool  # it is the spec's preemption signal
    handler: str  # preemption.handler
    program_catches: bool  # the program has a handler for it now
    hooked: bool  # the program runs under slurmgen's hook, which keeps the signal blocked until its handler is in
    stepwide: bool  # slurmstepd signalled every process of the step: the program has it already
    recent: bool  # the same signal came moments ago: a repeat of it


def task_route(facts: TaskSignalFacts) -> TaskRoute:
    """Where a signal that reached a task's supervisor goes (task/supervisor.py executes it). A step-wide one
    (slurmstepd signalled every process) reached the program already, and a repeat within moments is the same one;
    under handler requeue the preemption signal is the batch shell's business (it stops the step with SIGTERM);
    under handler program, one the program has no handler for yet is owed to it, and only a hooked program (which
    keeps it blocked until its handler is in) is sent it now."""
    if facts.preemption_signal and facts.handler == contract.HANDLER_REQUEUE:
        return TaskRoute(False, False)
    owed = facts.preemption_signal and facts.handler == contract.HANDLER_PROGRAM and not facts.program_catches
    if owed and not facts.hooked:
        return TaskRoute(False, True)  # discarded by the program's SIG_IGN: sent again once it has a handler
    return TaskRoute(not facts.stepwide and not facts.recent, owed)


# --- Signals that came before a start of the step ---------------------------------------------------------------


@dataclass(frozen=True)
class BeforeStepFacts:
    """The batch shell is about to start the step and holds signals that reached it (the template asks only when
    it holds one: `python -m slurmgen.batch before ATTEMPT`)."""

    EVENT: ClassVar[Event] = Event.SIGNAL_BEFORE_STEP
    signals: tuple[str, ...]  # the signals that reached the batch shell in this run, in order
    phase: Phase  # STARTING (the run's first start of the step) or RESTARTING (after a failed start)


@dataclass(frozen=True)
class BeforeStepPlan:
    action: BeforeStep
    code: int = 0  # BeforeStep.EXIT: the batch shell's exit code
    line: str | None = None


def decide_before_step(facts: BeforeStepFacts) -> BeforeStepPlan:
    """What the batch shell does at a start of the step with the signals it holds. TERM (contract.SAVE_EXIT_SIGNAL:
    Slurm or someone ends the job) and USR2 (contract.CLEAN_EXIT_SIGNAL: a clean exit is asked for) stop the run:
    before its first start there is no work to save, so the shell leaves with TERM's code or 0; between restarts
    there is a run to end (its record, its requeue, its state), so it goes to the run's end. Any other signal (the
    preemption signal) is given to the step once it starts."""
    stops = {contract.SAVE_EXIT_SIGNAL, contract.CLEAN_EXIT_SIGNAL} & set(facts.signals)
    if facts.phase is Phase.RESTARTING and stops:
        return BeforeStepPlan(BeforeStep.END, 0, "a stop signal came while the failed step was being restarted: not "
                              "started again")  # fmt: skip
    if contract.SAVE_EXIT_SIGNAL in stops:
        return BeforeStepPlan(BeforeStep.EXIT, exit_codes.EXIT_TERMINATED, "terminated before the step started")
    if contract.CLEAN_EXIT_SIGNAL in stops:
        return BeforeStepPlan(BeforeStep.EXIT, 0, "asked for a clean exit before the step started")
    return BeforeStepPlan(BeforeStep.START)


# --- handler auto: how long a program gets to take part -----------------------------------------------------------
ANNOUNCE_WAIT = 60.0  # s at most that auto gives a program to construct Preemption after the signal came


def announce_wait_for(lead_seconds: int | None) -> float:
    """A quarter of the lead time, at most a minute, so that an unmodified program keeps most of its window to
    stop. The batch shell waits this long; the local run says it when it sends the signal (slurmgen.local)."""
    return min(ANNOUNCE_WAIT, lead_seconds / 4) if lead_seconds is not None else ANNOUNCE_WAIT
