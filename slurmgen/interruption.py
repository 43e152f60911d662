"""What to do when a run of a job ends or is interrupted: one pure decision, tested as a table.

The processes that act (the batch shell's `end`, and later the supervisor and rank 0) gather the facts once,
ask here, and carry out the answer. Nothing here runs a command, reads a file or looks at the clock: every input
is a plain value, so each row of the rules below is a test without processes (tests/test_interruption.py).

Today's decision is the end of a run (`decide_end`, then `settle` once the requeue it asked for was tried). Its
inputs: how the step ended (srun's code and the first failing task's own), the handler, what the site's Slurm does
(does it requeue a job that ends in its grace time), Slurm's view of the job (or None: the call failed or timed
out), the run history of this run (read once: `RunRecord`), the signals the batch shell received and a task's
marker. A crash inside a running allocation is decided first (`decide_restart`): the step is started again in
the same allocation, within recovery.max_restarts, unless the failure repeats (the same error at the same saved
state: a bug, not the machine) or a stop is under way; a hang is decided the same way. Before every start of the
step, `decide_nodes` says which nodes it runs on: a node that failed its checks, or that Slurm shows down, is
replaced by a spare, or the job is requeued away from it. The decisions taken while the step runs (a signal's
cause and route, the window, the budgets, rank 0's stop) live beside this module, in
slurmgen/interruption_signal.py.

The rule for the resume state (README, "Reliability: faults and what they cost"): it is removed only on positive
evidence that the work is done: the program ended on its own (exit 0), no stop is recorded in the run history
for this run, no one asked for a requeue, and Slurm could be asked and shows no requeue. Anything else keeps it:
a stop (USR2, TERM, a user's own signal), a requeue (made, failed or refused), and uncertainty (a Slurm call that
failed or timed out), which is said in one line.

Standard library and the run history's vocabulary (slurmgen.run_history, a standard-library leaf) only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmgen import contract, exit_codes, run_history
from slurmgen.interruption_signal import slurm_ends_graced_preempted, slurm_requeues_in_grace

# How a run ended, as the batch shell records it (run-end's `ended`) and `slurmgen history` shows it.
COMPLETED = "completed"  # the work is done: the resume state is removed
STOPPED = "stopped"  # stopped before its work was done and not requeued (USR2, TERM, a failed requeue, a budget)
REQUEUED = "requeued"  # it comes back
FAILED = "failed"  # the program failed on its own
UNSURE = "unsure"  # exit 0, but Slurm could not be asked whether it was requeued: the state is kept

# How the batch shell requeues (slurmgen/requeue.py): `scontrol requeue Incomplete` while the job runs, a plain
# `scontrol requeue` for a job Slurm is ending (PreemptMode=CANCEL).
REQUEUE_RUNNING = "running"
REQUEUE_ENDED = "ended"
# Not a requeue: a new job continues the work from this job's state (batch/continuation.py), where Slurm would
# end a requeued run PREEMPTED anyway (CANCEL with a grace time, 24.05 and later).
CONTINUE = "continue"


@dataclass(frozen=True)
class SlurmSays:
    """`scontrol show job` at the end of the run (slurm/view.py), reduced to what the decision needs."""

    running: bool
    preempted: bool  # PreemptTime is set
    requeued: bool  # requeued since this run started (Restarts went up)
    mode: str | None  # the PreemptMode the state shows (SlurmView.mode)
    state_name: str


@dataclass(frozen=True)
class RunRecord:
    """This run's events in the run history (slurmgen.run_history), read once."""

    stop: str | None = None  # the cause of a stop that rank 0 or the batch shell recorded
    batch_stop: str | None = None  # the batch shell's own stop-and-requeue (handler requeue, auto's fallback)
    requeued_by: str | None = None  # who recorded a requeue of this run (rank0, batch-shell, slurm, resume)
    announced: bool = False  # rank 0 constructed Preemption
    finished: bool = False  # rank 0: the program reached its end without a stop (Preemption at exit)
    slurm_requeues_in_grace: bool = False  # the site's Slurm requeues a job that ends in its grace time
    continue_elsewhere: bool = False  # the site's Slurm ends this job PREEMPTED even if requeued (CANCEL + grace)


def run_record(history: run_history.History, run: int, *, batch_stop_actions: str) -> RunRecord:
    """What the run history says about ``run``, from its events read once: its stop, the batch shell's own stop
    (a stop event whose actions are ``batch_stop_actions``), its requeue, whether rank 0 constructed Preemption
    and saw the program finish, and what the site's Slurm does in a grace time (recorded at the run's start)."""
    stops = history.of_run(run, run_history.STOP)
    requeue = next(iter(history.of_run(run, run_history.REQUEUE)), None)
    return RunRecord(
        stop=str(stops[0].get("cause") or "stop") if stops else None,
        batch_stop=history.stop_by(run, batch_stop_actions),
        requeued_by=None if requeue is None else str(requeue.get("by") or "?"),
        announced=history.announced(run),
        finished=history.has(run, run_history.FINISHED),
        slurm_requeues_in_grace=slurm_requeues_in_grace(history.site(run)),
        continue_elsewhere=slurm_ends_graced_preempted(history.site(run)),
    )


@dataclass(frozen=True)
class EndFacts:
    step_code: int  # srun's exit code
    job_code: int  # the first failing task's own exit code, else the step's
    program_decides: bool  # preemption.handler: program
    preemption_on: bool  # the spec's preemption is on (SLURMGEN_PREEMPT_SIGNAL)
    requeue_on_failure: bool
    signals: tuple[str, ...]  # what reached the batch shell
    marker: str | None  # the cause a task left for the batch shell to requeue (it could not itself)
    slurm: SlurmSays | None  # None: Slurm could not be asked (failed, timed out, did not know the job)
    run: RunRecord
    unanswered: bool  # auto: the preemption signal came and the program ended before taking part
    signal_cause: str  # why a requeue signal came, by Slurm's PreemptTime and the clock (requeue.signal_cause)
    repeated: bool = False  # decide_restart found the failure repeats: a bug, so no requeue either


@dataclass(frozen=True)
class EndAction:
    """What the batch shell does after the step, before it knows how its requeue went."""

    requeue: str | None = None  # REQUEUE_RUNNING, REQUEUE_ENDED, CONTINUE or None
    cause: str | None = None  # the requeue's cause
    attribute: bool = False  # Slurm requeued the job: record it as Slurm's unless the run has a requeue
    preempted: bool = False  # record that Slurm is preempting this run
    slurm_requeues: bool = False  # Slurm requeues the job as it ends (grace time, 24.05 and later)
    stopped: bool = False  # the batch shell stopped the step for this requeue (its exit code if refused: 75)
    line: str | None = None  # said before the requeue's own message, if any


@dataclass(frozen=True)
class Ending:
    """How the run ends: the batch shell's exit code, whether the resume state goes, and what to say."""

    ended: str  # COMPLETED, STOPPED, REQUEUED, FAILED, UNSURE
    code: int  # the batch shell's exit code (the job's)
    requeued: bool
    remove_state: bool
    line: str | None = None


def decide_end(facts: EndFacts) -> EndAction:
    """Whether and how the batch shell requeues the job once its step has ended."""
    slurm, run = facts.slurm, facts.run
    if slurm is not None and slurm.requeued:
        return EndAction(attribute=True)
    if facts.preemption_on and not facts.program_decides and slurm is not None and slurm.preempted:
        if run.requeued_by is not None:
            return EndAction(preempted=True)  # rank 0 requeued it (its record says so; Slurm has not shown it yet)
        if slurm.running and run.slurm_requeues_in_grace:
            # Slurm requeues it whatever we do, even a finished program (24.05 and later): the state stays.
            line = "preempted in its grace time (PreemptMode=REQUEUE): Slurm requeues the job as it ends"
            return EndAction(preempted=True, slurm_requeues=True, line=line)
        if run.finished and facts.job_code == 0 and run.stop is None:
            # The program's work was done before the preemption reached it: nothing to come back for.
            return EndAction(preempted=True, line="preempted after the program had finished its work: not requeued")
        if run.continue_elsewhere:
            # CANCEL with a grace time on 24.05+: a requeued run would end PREEMPTED even after all the work
            # (run_history.slurm_ends_graced_preempted); a new job continues it and can end COMPLETED.
            return EndAction(requeue=CONTINUE, cause=run_history.PREEMPTION, preempted=True)
        how = REQUEUE_RUNNING if slurm.running else REQUEUE_ENDED
        return EndAction(requeue=how, cause=run_history.PREEMPTION, preempted=True)
    stopped_for = run.batch_stop if facts.preemption_on else None
    if stopped_for is None and facts.preemption_on and facts.unanswered:
        stopped_for = facts.signal_cause
    if stopped_for is not None or facts.marker is not None:
        asked = facts.marker
        if asked == run_history.PREEMPTION and slurm is not None:
            # A task that could not ask Slurm (no scontrol in its image) takes a requeue signal for a preemption;
            # Slurm, asked here, shows no PreemptTime: the signal was a request, or the time limit's warning.
            asked = facts.signal_cause
        cause = stopped_for or asked or run_history.PREEMPTION
        how = CONTINUE if cause == run_history.PREEMPTION and run.continue_elsewhere else REQUEUE_RUNNING
        return EndAction(requeue=how, cause=cause, stopped=stopped_for is not None)
    if facts.step_code != 0 and facts.requeue_on_failure and not facts.signals and not facts.repeated:
        return EndAction(requeue=REQUEUE_RUNNING, cause=run_history.FAILURE)
    return EndAction()


def settle(facts: EndFacts, plan: EndAction, outcome: str | None, key: str) -> Ending:
    """The end of the run, once the planned requeue was tried (``outcome``: requeue.RequeueOutcome.action, or None
    when none was planned)."""
    slurm, run = facts.slurm, facts.run
    requeued = (
        (slurm is not None and slurm.requeued)
        or plan.slurm_requeues
        or outcome in ("requeued", "continued")
        or run.requeued_by is not None
    )
    if requeued:
        return Ending(REQUEUED, 0, True, False)
    code = facts.job_code
    resume = f"slurmgen resume {key} brings it back from there"
    if plan.requeue is not None and outcome not in ("disabled", "not-running"):
        # Wanted and not made (over budget, or Slurm did not take it): the work is not done, the state stays.
        code = exit_codes.EXIT_REQUEUE_BUDGET if plan.stopped or code == 0 else code
        line = None  # the budget's refusal was said already
        if outcome != "budget":
            line = f"job {key} was not requeued (Slurm did not take the requeue): its resume state is kept; {resume}"
        return Ending(STOPPED, code, False, False, line)
    if code != 0:
        return Ending(FAILED, code, False, False)
    stop = run.stop or run.batch_stop or facts.marker
    if stop is not None or plan.requeue is not None:
        cause = stop or plan.cause
        return Ending(STOPPED, 0, False, False, f"job {key} stopped before its work was done ({cause}): its resume "
                      f"state is kept; {resume}")  # fmt: skip
    if slurm is None:
        return Ending(UNSURE, 0, False, False, f"Slurm could not be asked whether job {key} was requeued: its resume "
                      "state is kept (remove it by hand once the job is known to be done)")  # fmt: skip
    return Ending(COMPLETED, 0, False, True)


# --- A crash inside a running allocation ---------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """One failed start of the step: the task that failed first and the state it could resume from."""

    who: str  # "rank 1 on node2 (exit 3)": task_failure.TaskFailure.describe(), or "the step (exit N)"
    error: str  # the failing rank's last line of its own (a traceback's last line), "" when none
    saved: str  # what a restart would resume from (the newest save it can see), "" when nothing was saved


@dataclass(frozen=True)
class RestartFacts:
    step_code: int  # srun's exit code
    signals: tuple[str, ...]  # what reached the batch shell during this start of the step
    stopping: bool  # a stop or a requeue is recorded for this run, or a task left a requeue marker
    restarts: int  # restarts already made in this run
    max_restarts: int  # recovery.max_restarts
    failure: Failure
    previous: Failure | None  # the failure that caused the last restart of this run, if any
    event: str = "crash"  # RESTART_CRASH, or RESTART_HANG: the hang watchdog ended the step (task/watchdog.py)


@dataclass(frozen=True)
class RestartAction:
    restart: bool
    cause: str | None = None  # RESTART_CRASH, or REPEATED when it is not restarted because it repeats
    line: str | None = None


RESTART_CRASH = "crash"
RESTART_HANG = "hang"
REPEATED = "repeated"


def decide_restart(facts: RestartFacts) -> RestartAction:
    """Whether the batch shell starts the step again inside this allocation after it ended."""
    if facts.step_code == 0 or facts.signals or facts.stopping:
        return RestartAction(False)  # done, or a stop is under way: decide_end owns it
    failure, before = facts.failure, facts.previous
    if before is not None and failure.error and (failure.error, failure.saved) == (before.error, before.saved):
        line = (f"{failure.who} failed again with the same error at the same saved state ({failure.error!r}): a "
                "failure that repeats is not restarted; the job ends with the program's exit code")  # fmt: skip
        return RestartAction(False, REPEATED, line)
    if facts.restarts >= facts.max_restarts:
        if facts.max_restarts == 0:
            return RestartAction(False)
        line = f"{failure.who} failed; the restarts inside the allocation are spent ({facts.restarts} of " \
               f"{facts.max_restarts}, recovery.max_restarts)"  # fmt: skip
        return RestartAction(False, None, line)
    how = "hung" if facts.event == RESTART_HANG else "failed"
    line = (f"{failure.who} {how}: restarting the step inside the allocation (restart {facts.restarts + 1} of "
            f"{facts.max_restarts}), from the last complete checkpoint")  # fmt: skip
    return RestartAction(True, facts.event, line)


# --- A preemption notice that never reached the batch shell -------------------------------------------------

WATCH_SIGNAL = "signal"  # act as if the notice had come: send the preemption signal to the batch shell itself
WATCH_WAIT = "wait"  # nothing to do yet: ask Slurm again later
WATCH_DONE = "done"  # stop asking: the notice came, or there is no preemption to wait for any more


def decide_preempt_watch(preempted: bool | None, running: bool, received: frozenset[str], preempt_signal: str) -> str:
    """What the batch shell's watcher does after one look at the job (`preempted`: PreemptTime is set; None:
    Slurm could not be asked this time).

    Slurm sends the `--signal` user signal at preemption only with send_user_signal, and even then it may not
    arrive (measured on 24.11: 13 of 21 preemptions): the job is then told nothing before the TERM at the end of
    its grace time. PreemptTime on the job says the preemption began (src/interfaces/preempt.c sets preempt_time
    as the grace starts). A TERM or a stop signal that came already is the notice (or a stop of its own), so the
    watcher is done; so is a job that no longer runs (Slurm is ending or requeueing it)."""
    if received & {preempt_signal, contract.SAVE_EXIT_SIGNAL, contract.CLEAN_EXIT_SIGNAL}:
        return WATCH_DONE
    if preempted is None:
        return WATCH_WAIT
    if not running:
        return WATCH_DONE
    return WATCH_SIGNAL if preempted else WATCH_WAIT


def preempt_watch_needed(site: Mapping[str, Any]) -> bool:
    """Whether the watcher has anything to wait for in this run, from the site recorded at its start (the run
    history's run-start `site`; empty: Slurm could not be asked). It helps only where a preemption leaves the job
    a grace time to use: PreemptMode REQUEUE or CANCEL with GraceTime > 0 (without grace Slurm ends or requeues
    the job at once, and the TERM is the notice). With preempt/qos the mode and grace are the QOS's, which the
    record cannot know: watch. Unknown is watched too: a look is cheap, a lost grace is not."""
    if not site:
        return True
    if site.get("preempt_type") == "preempt/qos":
        return True
    try:
        grace = int(site.get("grace") or 0)
    except (TypeError, ValueError):
        return True
    return site.get("mode") in ("REQUEUE", "CANCEL") and grace > 0


# --- Bad nodes: before every start of the step -----------------------------------------------------------------


@dataclass(frozen=True)
class NodeFacts:
    """What is known of the allocation's nodes before a start of the step (batch/nodes.py gathers it)."""

    hosts: tuple[str, ...]  # the allocation's nodes, in Slurm's order (SLURM_JOB_NODELIST)
    needed: int  # the spec's `nodes`: the step runs on exactly this many
    excluded: Mapping[str, str]  # nodes excluded earlier in this run, and why
    failed: Mapping[str, str]  # nodes that failed a check now, or that Slurm shows down: evidence, with its reason


@dataclass(frozen=True)
class NodePlan:
    run_on: tuple[str, ...]  # the nodes the step starts on; () when it does not start in this allocation
    exclude: tuple[tuple[str, str], ...]  # newly excluded nodes and why, to record
    requeue_excluding: tuple[str, ...] = ()  # no spare left: requeue the job with these nodes in its ExcNodeList
    line: str | None = None


def decide_nodes(facts: NodeFacts) -> NodePlan:
    """Which nodes the step starts on. A node is blamed only on evidence (a failed check, Slurm's own state), never
    for the program's exception. With enough healthy nodes left (the spares), the step runs on the first
    ``needed`` of them inside this allocation; without, the job is requeued away from every bad node."""
    new = tuple((n, facts.failed[n]) for n in facts.hosts if n in facts.failed and n not in facts.excluded)
    bad = set(facts.excluded) | {n for n, _ in new}
    healthy = tuple(n for n in facts.hosts if n not in bad)
    said = "; ".join(f"{n}: {why}" for n, why in new)
    if len(healthy) >= facts.needed:
        line = None
        if new:
            spare = len(healthy) - facts.needed
            line = (f"excluding {said}; the step runs on {', '.join(healthy[: facts.needed])} "
                    f"({spare} spare node{'s' if spare != 1 else ''} left)")  # fmt: skip
        return NodePlan(healthy[: facts.needed], new, (), line)
    away = tuple(n for n in facts.hosts if n in bad)
    line = (f"{'excluding ' + said + '; ' if new else ''}{len(healthy)} healthy node{'s' if len(healthy) != 1 else ''}"
            f" of {facts.needed} needed, no spare left: requeueing the job away from {', '.join(away)}")  # fmt: skip
    return NodePlan((), new, away, line)
