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

The same module holds the two rules the end shares with rank 0 and with the restart in the allocation: the requeue's
route (below the end) and the rank that failed among its casualties (last).

Standard library and the run history's vocabulary only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from slurmgen import contract, exit_codes, run_history
from slurmgen.interruption.states import Ended, Event, RequeueHow, RequeueResult, RequeueRoute

# --- the requeue's route ---------------------------------------------------------------------------------
#
# Whether and how a requeue goes: why it is asked for (`signal_cause`), its budget, what the site's Slurm does by
# itself, and the way it is made.
#
# The one place where a requeue is refused over its budget (`route_requeue`, `budget_refusal`): slurmgen/requeue.py
# asks here and carries the route out, for rank 0 and for the batch shell, while the job runs and after Slurm ended
# it. What the site's Slurm does in a preemption's grace time comes in as `SiteFacts`, read by the caller from the
# run's recorded site (its version parsed there, by slurmgen.slurm.ids): nothing here parses or asks.

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


# --- the end of the run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmSays:
    """`scontrol show job` at the end of the run (slurmgen/requeue.py, `look`), reduced to what the decision needs."""

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
    start, read by the caller; the default knows nothing of the site, for a caller that does not decide on it)."""
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
        if run.finished and facts.job_code == 0 and run.stop is None:
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


# --- The preemption signal that no one took -------------------------------------------------------------------


def fallback_warning(sig: str, waited: float | None) -> str:
    """What auto says when it stops and requeues a program that never constructed Preemption."""
    within = f" within {waited:g} s of SIG{sig}" if waited is not None else ""
    return (
        f"warning: the program did not construct slurmgen's Preemption{within}, so SIG{sig} cannot make it save: "
        "stopping the step with SIGTERM and requeueing the job (preemption.handler: auto); construct Preemption in "
        f"the program to save first, or set preemption.handler: program if it handles SIG{sig} itself, or requeue "
        "if it resumes from its own checkpoints"
    )


def fallback_note(sig: str, waited: float | None) -> str:
    """auto's fallback as the run history keeps it (STOP's `fallback`), for `slurmgen history`, `status` and the
    local run's terminal: said in the batch log alone, nobody would read why the program's stop was late."""
    within = f" within {waited:g} s" if waited is not None else ""
    return (
        f"preemption.handler auto: the program did not construct Preemption{within} of SIG{sig}, so the step was "
        "stopped with SIGTERM and requeued; set preemption.handler: requeue to stop it at once"
    )


def unanswered(
    preempt_signal: str | None, signals: tuple[str, ...], step_code: int, handler: str, run: RunRecord
) -> bool:
    """After a failed step, under auto: the preemption signal came, the program never constructed Preemption and
    the batch shell had not decided yet (the step ended first: a program killed by the signal, say). The job
    comes back as the fallback would have made it (EndFacts.unanswered; say `fallback_warning`)."""
    if step_code == 0 or not preempt_signal or preempt_signal not in signals or handler != contract.HANDLER_AUTO:
        return False
    return not run.announced and run.batch_stop is None


def never_taken(preempt_signal: str | None, signals: tuple[str, ...], handler: str, run: RunRecord) -> str | None:
    """After the step: a warning when the preemption signal came under handler runtime and the program never
    constructed Preemption, so nothing ever acted on it (it stayed blocked); else None."""
    if not preempt_signal or preempt_signal not in signals or handler != contract.HANDLER_RUNTIME or run.announced:
        return None
    return (
        f"warning: SIG{preempt_signal} reached the job, but the program never constructed slurmgen's Preemption, "
        "so nothing acted on it (preemption.handler: runtime); construct Preemption, or set preemption.handler: "
        "auto to stop and requeue such a program"
    )


# --- the rank that failed, not its casualties ----------------------------------------------------------
#
# Which of a start's failed tasks caused the failure, and what of its error line identifies the error (the
# repeated-failure rule compares that, allocation.decide_restart).
#
# When one rank fails, the others die of it: their peers' connections close and they exit with slurmgen's peer-loss
# code (exit_codes.EXIT_PEER_LOST), or srun's --kill-on-bad-exit ends the step and they die of its signal (TERM,
# then KILL after KillWait: srun(1)). At 16,384 ranks, 16,383 casualties stand around one cause, and the first exit
# recorded is often a casualty's: a peer sees the closed connection before the failing rank has finished exiting.

STEP_SIGNALS = frozenset({"TERM", "KILL"})  # what srun and slurmstepd send the tasks of a step they end


@dataclass(frozen=True)
class TaskEnd:
    """One failed task of a start of the step, as its supervisor recorded it."""

    rank: int
    exit_code: int
    signal: str | None  # the program died of this signal ("KILL"), None when it exited
    time: float  # epoch seconds of the record


def is_casualty(end: TaskEnd, ends: Sequence[TaskEnd]) -> bool:
    """A task that died of another's failure: it lost its peers (exit 76), or it died of the step's signal after
    another task had already failed."""
    if end.exit_code == exit_codes.EXIT_PEER_LOST:
        return True
    by_step = end.signal in STEP_SIGNALS or end.exit_code in (128 + 15, 128 + 9)
    return by_step and any(other.time < end.time and other.rank != end.rank for other in ends)


def cause_of(ends: Sequence[TaskEnd]) -> TaskEnd | None:
    """The task that failed on its own, the earliest of them; only casualties: the earliest casualty."""
    if not ends:
        return None
    own = [end for end in ends if not is_casualty(end, ends)]
    return min(own or ends, key=lambda end: (end.time, end.rank))


@dataclass(frozen=True)
class TaskFailure:
    rank: int
    node: str
    exit_code: int
    signal: str | None  # the program died of this signal (exit_code is then 128 + its number)
    log: str | None
    time: float

    def describe(self) -> str:
        how = f"killed by SIG{self.signal}" if self.signal else f"exit {self.exit_code}"
        return f"rank {self.rank} on {self.node} ({how})"


def first_failure(events: Iterable[Mapping[str, Any]], run: int) -> TaskFailure | None:
    """The task of ``run`` that failed on its own, the earliest of them, not a casualty of it (a rank that lost its
    peers, exit 76, or died of the step's signal after another failed: `is_casualty`); None when no
    task-exit event."""
    found: list[TaskFailure] = []
    for e in events:
        if e.get("event") != run_history.TASK_EXIT or e.get("run") != run:
            continue
        try:
            found.append(
                TaskFailure(
                    rank=int(e["rank"]),
                    node=str(e.get("node") or "?"),
                    exit_code=int(e["exit_code"]),
                    signal=str(e["signal"]) if e.get("signal") else None,
                    log=str(e["log"]) if e.get("log") else None,
                    time=float(e.get("time") or 0.0),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    cause = cause_of([TaskEnd(f.rank, f.exit_code, f.signal, f.time) for f in found])
    return None if cause is None else next(f for f in found if (f.rank, f.time) == (cause.rank, cause.time))


# What changes from one attempt to the next in the same error: an address (IPv4, with its port), a pointer or
# other hexadecimal value, and any number of four or more digits (a port, a pid, a byte count, a time).
CHANGING = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\b0x[0-9a-fA-F]+\b|\b\d{4,}\b")


def error_key(line: str) -> str:
    """What identifies an error line: the line without the numbers that change with every attempt."""
    return CHANGING.sub("#", line)


def stop_of_a_casualty(stop_time: float | None, ends: Sequence[TaskEnd], signals: Sequence[str]) -> bool:
    """Whether rank 0's recorded stop is a casualty's, not a stop under way: no signal reached the batch shell (no
    preemption, time limit or scancel), and a task had failed on its own before it. srun's --kill-on-bad-exit
    sends the rest of the step SIGTERM, which Preemption takes for a stop like any other (srun(1))."""
    cause = cause_of(ends)
    if stop_time is None or cause is None or signals or is_casualty(cause, ends):
        return False
    return stop_time >= cause.time
