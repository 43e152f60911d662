"""How a run ends once its step has ended for good: whether and how the batch shell brings the job back
(`decide_end`), then, once that requeue was tried, the run's end (`settle`): its exit code, whether the resume state
goes, what to say.

The inputs: how the step ended (srun's code and the first failing task's own), the handler, what the site's Slurm
does (does it requeue a job that ends in its grace time), Slurm's view of the job (or None: the call failed or
timed out), the run history of this run (read once: `RunRecord`), the signals the batch shell received and a
task's marker.

The rule for the resume state (docs/reliability.md, "Reliability: faults and what they cost"): it is removed only on
positive evidence that the work is done: the program ended on its own (exit 0), no stop is recorded in the run
history for this run, no one asked for a requeue, and Slurm could be asked and shows no requeue. Anything else keeps
it: a stop (USR2, TERM, a user's own signal), a requeue (made, failed or refused), and uncertainty (a Slurm call that
failed or timed out), which is said in one line.

Standard library and the run history's vocabulary only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from slurmgen import exit_codes, run_history
from slurmgen.interruption.requeue_route import SiteFacts, slurm_ends_graced_preempted, slurm_requeues_in_grace
from slurmgen.interruption.states import Ended, Event, RequeueHow, RequeueResult


@dataclass(frozen=True)
class SlurmSays:
    """`scontrol show job` at the end of the run (slurm/view.py, `look`), reduced to what the decision needs."""

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
    continued: bool = False  # the batch shell submitted a continuation job of this run (its SIGTERM step)
    announced: bool = False  # rank 0 constructed Preemption
    finished: bool = False  # rank 0: the program reached its end without a stop (Preemption at exit)
    slurm_requeues_in_grace: bool = False  # the site's Slurm requeues a job that ends in its grace time
    continue_elsewhere: bool = False  # the site's Slurm ends this job PREEMPTED even if requeued (CANCEL + grace)


_UNKNOWN_SITE = SiteFacts()


def run_record(
    history: run_history.History, run: int, *, batch_stop_actions: str, site: SiteFacts = _UNKNOWN_SITE
) -> RunRecord:
    """What the run history says about ``run``, from its events read once: its stop, the batch shell's own stop
    (a stop event whose actions are ``batch_stop_actions``), its requeue, whether rank 0 constructed Preemption
    and saw the program finish, and what the site's Slurm does in a grace time (``site``: recorded at the run's
    start, read by the caller; the default knows nothing of the site, for a caller that does not decide on it).
    Only the current start of the step counts: after a restart inside the allocation, the stop that the failed
    start's casualty recorded (srun's --kill-on-bad-exit TERM) is that start's story, not this run's end."""
    history = history.current_start(run)
    stops = history.of_run(run, run_history.STOP)
    requeue = next(iter(history.of_run(run, run_history.REQUEUE)), None)
    return RunRecord(
        stop=str(stops[0].get("cause") or "stop") if stops else None,
        batch_stop=history.stop_by(run, batch_stop_actions),
        requeued_by=None if requeue is None else str(requeue.get("by") or "?"),
        continued=history.has(run, run_history.CONTINUED),
        announced=history.announced(run),
        finished=history.has(run, run_history.FINISHED),
        slurm_requeues_in_grace=slurm_requeues_in_grace(site),
        continue_elsewhere=slurm_ends_graced_preempted(site),
    )


@dataclass(frozen=True)
class EndFacts:
    """The step ended for good (no restart inside the allocation): what the batch shell knows at that moment."""

    EVENT: ClassVar[Event] = Event.STEP_ENDED
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
    ended_in_wait: bool = False  # handler auto: the step ended within auto's wait for Preemption (AUTO_WAIT)


@dataclass(frozen=True)
class EndAction:
    """What the batch shell does after the step, before it knows how its requeue went."""

    requeue: RequeueHow | None = None
    cause: str | None = None  # the requeue's cause
    attribute: bool = False  # Slurm requeued the job: record it as Slurm's unless the run has a requeue
    preempted: bool = False  # record that Slurm is preempting this run
    slurm_requeues: bool = False  # Slurm requeues the job as it ends (grace time, 24.05 and later)
    stopped: bool = False  # the batch shell stopped the step for this requeue (its exit code if refused: 75)
    line: str | None = None  # said before the requeue's own message, if any


@dataclass(frozen=True)
class Ending:
    """How the run ends: the batch shell's exit code, whether the resume state goes, and what to say."""

    ended: Ended
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
        if run.requeued_by is not None or run.continued:
            # rank 0 requeued it (its record says so; Slurm has not shown it yet), or the batch shell's SIGTERM
            # step, at the grace's end, did (a requeue, or a continuation job)
            return EndAction(preempted=True)
        if slurm.running and run.slurm_requeues_in_grace:
            # Slurm requeues it whatever we do, even a finished program (24.05 and later): the state stays.
            line = "preempted in its grace time (PreemptMode=REQUEUE): Slurm requeues the job as it ends"
            return EndAction(preempted=True, slurm_requeues=True, line=line)
        # An unmodified program under auto (it never constructed Preemption) records no finish; one that ended 0
        # during auto's wait, before the batch shell stopped it and with no TERM from Slurm, ended on its own.
        on_its_own = (facts.ended_in_wait and not run.announced and run.batch_stop is None
                      and "TERM" not in facts.signals)  # fmt: skip
        if (run.finished or on_its_own) and facts.job_code == 0 and facts.step_code == 0 and run.stop is None:
            # The program's work was done before the preemption reached it: nothing to come back for.
            return EndAction(preempted=True, line="preempted after the program had finished its work: not requeued")
        if run.continue_elsewhere:
            # CANCEL with a grace time on 24.05+: a requeued run would end PREEMPTED even after all the work
            # (slurm_ends_graced_preempted); a new job continues it and can end COMPLETED.
            return EndAction(requeue=RequeueHow.CONTINUE, cause=run_history.PREEMPTION, preempted=True)
        how = RequeueHow.RUNNING if slurm.running else RequeueHow.ENDED
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
        how = RequeueHow.CONTINUE if cause == run_history.PREEMPTION and run.continue_elsewhere else RequeueHow.RUNNING
        return EndAction(requeue=how, cause=cause, stopped=stopped_for is not None)
    if facts.step_code != 0 and facts.requeue_on_failure and not facts.signals and not facts.repeated:
        return EndAction(requeue=RequeueHow.RUNNING, cause=run_history.FAILURE)
    return EndAction()


@dataclass(frozen=True)
class Settle:
    """The planned requeue was tried (``outcome``: requeue.RequeueOutcome.action, or None when none was planned)."""

    EVENT: ClassVar[Event] = Event.RUN_ENDED
    facts: EndFacts
    plan: EndAction
    outcome: RequeueResult | str | None
    key: str


def settle(question: Settle) -> Ending:
    """The end of the run, once the planned requeue was tried."""
    facts, plan, outcome, key = question.facts, question.plan, question.outcome, question.key
    slurm, run = facts.slurm, facts.run
    requeued = (
        (slurm is not None and slurm.requeued)
        or plan.slurm_requeues
        or outcome in (RequeueResult.REQUEUED, RequeueResult.CONTINUED)
        or run.requeued_by is not None
        or run.continued
    )
    if requeued:
        return Ending(Ended.REQUEUED, 0, True, False)
    code = facts.job_code
    resume = f"slurmgen resume {key} brings it back from there"
    if plan.requeue is not None and outcome not in (RequeueResult.DISABLED, RequeueResult.NOT_RUNNING):
        # Wanted and not made (over budget, or Slurm did not take it): the work is not done, the state stays.
        code = exit_codes.EXIT_REQUEUE_BUDGET if plan.stopped or code == 0 else code
        line = None  # the budget's refusal was said already
        if outcome != RequeueResult.BUDGET:
            line = f"job {key} was not requeued (Slurm did not take the requeue): its resume state is kept; {resume}"
        return Ending(Ended.STOPPED, code, False, False, line)
    if code != 0:
        return Ending(Ended.FAILED, code, False, False)
    stop = run.stop or run.batch_stop or facts.marker
    if stop is not None or plan.requeue is not None:
        cause = stop or plan.cause
        line = f"job {key} stopped before its work was done ({cause}): its resume state is kept; {resume}"
        return Ending(Ended.STOPPED, 0, False, False, line)
    if slurm is None:
        line = f"Slurm could not be asked whether job {key} was requeued: its resume state is kept (remove it by " \
               "hand once the job is known to be done)"  # fmt: skip
        return Ending(Ended.UNSURE, 0, False, False, line)
    return Ending(Ended.COMPLETED, 0, False, True)
