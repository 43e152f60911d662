"""The batch shell's decisions, in Python: what happened to this run, and whether and how the job comes back.

    python3 -m slurmgen.batch begin          # at the start of every run
    python3 -m slurmgen.batch before N       # a signal came before start N of the step: start, end, exit CODE
    python3 -m slurmgen.batch signal SIG [PID]  # in the background: TERM or the preemption signal reached
                                                     # the batch shell; PID is srun's (batch/signals.py)
    python3 -m slurmgen.batch restart RC N   # after a failed step: exit 0 to start it again in the
                                                     # allocation (batch/restart.py)
    python3 -m slurmgen.batch end RC         # after the step, with its exit code; exits with the job's
    python3 -m slurmgen.batch steps          # spec field steps: the first step not done (batch/steps.py)
    python3 -m slurmgen.batch step-done I RC # after step I: exit 0 to start the next
    python3 -m slurmgen.batch setup-failed RC N TEXT  # setup item N failed before the step (batch/setup_failure.py)

The rendered script keeps only what bash must do (traps, forwarding, waiting); every rule lives here, once,
with the runtime's own code (budgets, run history, Slurm's view of the job), and is tested as Python.

Why the batch shell, and not only rank 0: it runs outside any container (where scontrol is missing), it outlives
the tasks by a moment, and it is there when the program is not slurmgen's (an unmodified script). It covers the
preemptions that no rank handles (slurm.conf(5) PreemptMode, GraceTime; measured on Slurm 22.05):
- REQUEUE with a grace time and no user signal: SIGTERM reaches only the tasks; a job whose tasks save and exit
  before the grace ends is finalised as FAILED and never requeued. `end` finds it still RUNNING with
  PreemptTime set and requeues it (`scontrol requeue Incomplete`): it gives its nodes back as soon as its state
  is durable.
- CANCEL: Slurm never requeues. `signal TERM` finds the job ending with PreemptTime set and no new run counted,
  and requeues it with a plain `scontrol requeue`, which takes back a completing job; it does so at once, before
  the save ends, so a save cut short by SIGKILL still leaves the job queued, to resume from the state before.
- REQUEUE without grace: Slurm requeued the job itself; `end` (or the next run's `begin`) records that it did.
With `preemption.handler: program` the program decides, and the batch shell requeues none of these.

`end` also gives the job the exit code of the task that failed first (batch/task_failure.py), and removes the
resume state only when the work is done (slurmgen/interruption/ has the rule: exit 0, no stop recorded, no
requeue asked for, and Slurm could be asked); a stopped run keeps it for `slurmgen resume`.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from slurmgen import contract, exit_codes, run_history, trust
from slurmgen.interruption.requeue_route import slurm_requeue_cause
from slurmgen.job_context.context import JobContext
from slurmgen.requeue import record, requeue_ended_job, requeue_this_job, signal_cause, site_facts
from slurmgen.slurm.site import (
    SitePreemption,
    default_partition,
    parse_config,
    parse_partitions,
    site_preemption,
    site_preemption_event,
    window_problems,
)
from slurmgen.slurm.view import look

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.retry import Retry

WRITER = "batch-shell"
WAIT_SLACK = 5.0  # s: the step's end reaches `end` a moment after the step ended (srun's return, bash's wait)
USAGE = (
    "usage: python3 -m slurmgen.batch begin | before ATTEMPT | signal SIG [PID] | restart RC ATTEMPT | "
    "watch SHELL_PID SIG | end RC | steps | step-done INDEX RC | setup-failed RC ITEM TEXT"
)


def _say(line: str) -> None:
    print(f"slurmgen: {line}", file=sys.stderr, flush=True)


def begin(ctx: JobContext, say: Callable[[str], None] = _say, client: SlurmClient | None = None) -> int:
    """Record the run's start (with what this site's Slurm will do on preemption); record the requeues Slurm made
    that no earlier run could record; say once when the last save would not fit the window of the next stop."""
    log_dir = ctx.log_dir
    if not log_dir:
        return 0
    run = ctx.run
    history = run_history.History.load(log_dir)
    for past in range(1, run):
        summary = history.run(past)
        if summary is not None and summary.requeued_by is not None:
            continue
        preempted = summary is not None and summary.cause == run_history.PREEMPTION
        cause = run_history.PREEMPTION if preempted else run_history.EXTERNAL
        mode = "REQUEUE" if preempted else None  # Slurm requeued a preempted job: PreemptMode=REQUEUE
        run_history.append(log_dir, "slurm", run_history.REQUEUE, past, time.time(), cause=cause, mode=mode)
        how = "after a preemption" if preempted else "by Slurm or an admin (scontrol requeue, a node failure)"
        say(f"run {past} was requeued {how}")
    plan = _site_preemption(ctx, client)
    from slurmgen.batch.queue_times import queue_times
    from slurmgen.slurm.ids import parse_sluid

    # The run's own id where Slurm gives one (SLURM_JOB_SLUID, 26.05+): unique across requeues and clusters.
    sluid = parse_sluid(ctx.sluid)
    record(
        ctx,
        WRITER,
        run_history.RUN_START,
        nodes=ctx.nodes,
        host=socket.gethostname(),
        partition=ctx.partition,
        site=None if plan is None else site_preemption_event(plan),
        queue=queue_times(ctx, client),  # Slurm's submit, eligible and start times (slurmgen report)
        **({} if sluid is None else {"sluid": sluid}),
    )
    saved = history.last_save()
    if plan is not None and saved is not None and saved.save_seconds is not None and ctx.preempt_signal:
        for problem in window_problems(plan, saved.save_seconds, saved.step_seconds):
            say(f"warning: the last save may not fit its window: {problem} (slurmgen doctor says what to do)")
    return 0


def _site_preemption(ctx: JobContext, client: SlurmClient | None) -> SitePreemption | None:
    """What preemption and the time limit do to this job here (two scontrol questions), or None if unknown."""
    from slurmgen.errors import SlurmgenError
    from slurmgen.slurm.client import SlurmClient

    if ctx.in_container:
        return None
    asker = client or SlurmClient(timeout=10.0)
    name = ctx.partition
    try:
        site = parse_config(asker.show_config())
        partitions = parse_partitions(asker.show_partitions(name.split(",")[0] if name else None))
    except (SlurmgenError, ValueError):
        return None
    partition = next((p for p in partitions if name and p.name == name.split(",")[0]), None)
    return site_preemption(site, partition or default_partition(partitions), ctx.lead_seconds)


def end(
    rc: int,
    job: JobContext,
    say: Callable[[str], None] = _say,
    client: SlurmClient | None = None,
    retry: Retry | None = None,
) -> int:
    """After the step (``job``: the context the entry point read once): gather the facts once (the step's code,
    the signals, a task's marker, Slurm's view, this run's history), let slurmgen.interruption decide, and carry it
    out: requeue, record the run's end, remove the resume state only when the work is done. Returns the batch
    shell's exit code."""
    from slurmgen.batch.signals import STOP_ACTIONS
    from slurmgen.interruption import decide
    from slurmgen.interruption.ending import EndFacts, Settle, run_record
    from slurmgen.interruption.fallback import fallback_warning, never_taken, unanswered
    from slurmgen.interruption.states import RequeueHow

    # SLURMGEN_CONTAINER says the *tasks* run in an image (no scontrol there); this shell runs outside it, and is
    # the one that requeues for them: with the flag it would only leave itself another marker.
    ctx = dataclasses.replace(job, in_container=False)
    key = ctx.key
    if key is None:
        return rc
    restarts = ctx.restart_count
    preemption_on = ctx.preempt_signal is not None
    signals = tuple(_record_signals(ctx))
    # One read of the run history for the whole decision (the signals just recorded included), as the current step
    # (spec field steps) sees it: the stops and task exits of the steps that completed before it are theirs.
    history = run_history.History.load(ctx.log_dir).current_step(ctx.run)
    site = site_facts(history, ctx.run)
    this_run = run_record(history, ctx.run, batch_stop_actions=STOP_ACTIONS, site=site)
    if (unheard := never_taken(ctx.preempt_signal, signals, ctx.handler, this_run)) is not None:
        say(unheard)
    code, failing = _job_code(rc, ctx, history, say)
    asked = _take_marker(ctx)
    view = look(key, client, retry)
    fallback = preemption_on and unanswered(ctx.preempt_signal, signals, rc, ctx.handler, this_run)
    if fallback and ctx.preempt_signal:
        say(fallback_warning(ctx.preempt_signal, None))
    facts = EndFacts(
        step_code=rc,
        job_code=code,
        program_decides=ctx.handler == contract.HANDLER_PROGRAM,
        preemption_on=preemption_on,
        requeue_on_failure=ctx.requeue_on_failure,
        signals=signals,
        marker=asked,
        slurm=None if view is None else view.says(restarts),
        run=this_run,
        unanswered=fallback,
        signal_cause=signal_cause(ctx, None if view is None else view.preempted(), time.time()),
        repeated=history.has(ctx.run, run_history.REPEATED),
        ended_in_wait=ctx.handler == contract.HANDLER_AUTO and _ended_in_wait(history, ctx.run, time.time()),
    )
    plan = decide(facts)
    if plan.attribute and view is not None:
        _attribute(ctx, history, view.preempted())
    mode = None if view is None else view.mode(restarts)
    if plan.preempted and view is not None:
        record(ctx, WRITER, run_history.PREEMPTED, mode=mode, state=view.state_name)
    if plan.line:
        say(plan.line)
    outcome = None
    if plan.requeue is not None and plan.cause is not None:
        if plan.requeue is RequeueHow.CONTINUE:
            from slurmgen.batch.continuation import submit_continuation

            outcome = submit_continuation(key, plan.cause, ctx, by=WRITER, client=client)
        elif plan.requeue is RequeueHow.ENDED:
            outcome = requeue_ended_job(
                key, plan.cause, ctx, by=WRITER, client=client, retry=retry, history=history, site=site
            )
        else:
            outcome = requeue_this_job(
                plan.cause, ctx, by=WRITER, client=client, retry=retry, history=history, before=view, site=site
            )
        say(f"preempted{f' (PreemptMode={mode})' if mode else ''}: {outcome.message}" if plan.preempted else
            outcome.message)  # fmt: skip
    ending = decide(Settle(facts, plan, None if outcome is None else outcome.action, key))
    if ending.line:
        say(ending.line)
    recorded = code if ending.requeued else ending.code
    if ctx.expedite and not ending.requeued and ending.code != 0:
        _no_expedited_requeue(key, ending.code, client, say)
    record(ctx, WRITER, run_history.RUN_END, exit_code=recorded, step_code=rc, requeued=ending.requeued,
           failing=failing, ended=ending.ended)  # fmt: skip
    if ending.remove_state:
        from slurmgen.batch.resume_state import remove_state

        remove_state(ctx, key, say)
    from slurmgen.progress_mark import clear_node_dir

    clear_node_dir(ctx)  # the step has ended: nothing of it is left to read or write this node's directory
    return ending.code


def _no_expedited_requeue(key: str, code: int, client: SlurmClient | None, say: Callable[[str], None]) -> None:
    """A run of a job with --requeue=expedite that ends for good with a non-zero code: Slurm would requeue the job
    and hold it (REQUEUE_HOLD, "holding expedited requeue ... as no epilogs failed": src/slurmctld/job_mgr.c
    `batch_requeue_fini`; measured on 26.05), so it clears the job's requeue flag first and the job ends FAILED."""
    from slurmgen.errors import SlurmgenError
    from slurmgen.slurm.client import SlurmClient

    try:
        (client or SlurmClient(timeout=10.0)).clear_requeue(key)
    except SlurmgenError as exc:
        say(f"warning: could not clear the expedited requeue ({exc}): Slurm may hold the job for a requeue")
        return
    say(f"the run ended for good (exit {code}): expedited requeue cleared, so Slurm does not requeue and hold it")


def _ended_in_wait(history: run_history.History, run: int, now: float) -> bool:
    """Whether this run's step ended within handler auto's wait for Preemption (the batch shell's auto-wait
    record: when it began and for how long): before the wait was over, so before auto stopped it."""
    for wait in history.of_run(run, run_history.AUTO_WAIT):
        began, seconds = float(wait.get("time") or 0.0), wait.get("seconds")
        if isinstance(seconds, (int, float)) and began <= now <= began + float(seconds) + WAIT_SLACK:
            return True
    return False


def _job_code(
    rc: int, ctx: JobContext, history: run_history.History, say: Callable[[str], None]
) -> tuple[int, str | None]:
    """The job's exit code: the first failing task's own (its supervisor recorded it), else the step's."""
    from slurmgen.batch import task_failure

    if rc == 0 or not ctx.log_dir:
        return rc, None
    # After restarts inside the allocation (batch/restart.py), the last start of the step is the one ending.
    since = history.last_restart_time(ctx.run)
    step_kills = not ctx.run_on_bad_exit
    failure = task_failure.first_failure(history.since(since), ctx.run, step_kills)
    if failure is None:
        return rc, None
    for line in task_failure.report(failure, rc, task_failure.tail(failure.log), step_kills):
        say(line)
    return failure.exit_code, failure.describe()


def _record_signals(ctx: JobContext) -> list[str]:
    """The signals the batch shell received (SLURMGEN_SIGNALS: `SIG@epoch ...`), recorded; their names."""
    names = []
    for name, when in ctx.signals:
        at = time.time() if when is None else when
        if ctx.log_dir:
            run_history.append(ctx.log_dir, WRITER, run_history.SIGNAL, ctx.run, at, sig=name)
        names.append(name)
    return names


def _take_marker(ctx: JobContext) -> str | None:
    """The cause a task left when it could not requeue by itself (inside a container), and remove it."""
    state_dir, name = ctx.state_dir, ctx.requeue_marker
    if not state_dir or not name:
        return None
    path = os.path.join(state_dir, name)
    try:
        # Another user's marker in a shared state directory must not requeue this job (trust.py).
        data = trust.read_or_warn(path, _stderr, "believed")
        if data is None:
            return None
        cause = data.decode("utf-8", "replace").strip() or run_history.PREEMPTION
        os.unlink(path)
    except OSError:
        return None
    return cause


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _attribute(ctx: JobContext, history: run_history.History, preempted: bool) -> None:
    """Slurm requeued the job (or rank 0 did, and recorded it): record Slurm's unless the run has a requeue."""
    if not ctx.log_dir:
        return
    mine = history.run(ctx.run)
    if mine is not None and mine.requeued_by is not None:
        return
    cause = slurm_requeue_cause(preempted, history.site_mode(ctx.run))
    mode = "REQUEUE" if cause == run_history.PREEMPTION else None
    run_history.append(ctx.log_dir, "slurm", run_history.REQUEUE, ctx.run, time.time(), cause=cause, mode=mode)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # Slurm signals every process of the batch step when it ends or requeues the job: this helper must finish
    # its record (and its requeue) rather than die of that SIGTERM halfway.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        env = JobContext.from_environ(os.environ if environ is None else environ)  # read once for the whole step
        if args == ["begin"]:
            return begin(env)
        if len(args) == 2 and args[0] == "before" and args[1].isdigit():
            from slurmgen.batch.signals import before_step

            print(before_step(int(args[1]), env, _say), flush=True)
            return 0
        if args[:1] == ["signal"] and len(args) in (2, 3) and (len(args) == 2 or args[2].isdigit()):
            from slurmgen.batch.signals import on_signal

            return on_signal(args[1], int(args[2]) if len(args) == 3 else None, env, _say)
        if len(args) == 3 and args[0] == "restart" and args[1].isdigit() and args[2].isdigit():
            from slurmgen.batch.restart import restart

            return restart(int(args[1]), int(args[2]), env, _say)
        if len(args) == 2 and args[0] == "end" and args[1].isdigit():
            return end(int(args[1]), env)
        if args == ["steps"]:
            from slurmgen.batch.steps import first_step

            print(first_step(env), flush=True)
            return 0
        if len(args) == 3 and args[0] == "step-done" and args[1].isdigit() and args[2].isdigit():
            from slurmgen.batch.steps import step_done

            return step_done(int(args[1]), int(args[2]), env, _say)
        if len(args) == 4 and args[0] == "setup-failed" and args[1].isdigit() and args[2].isdigit():
            from slurmgen.batch.setup_failure import setup_failed

            return setup_failed(int(args[1]), int(args[2]), args[3], env, _say)
        if len(args) == 3 and args[0] == "watch" and args[1].isdigit():
            from slurmgen.batch.watch import watch

            return watch(int(args[1]), args[2], env, _say)
    except Exception as error:  # the batch shell must go on: its job's exit code matters more than our record
        _say(f"internal error in the batch shell's {args[0] if args else ''} step ({type(error).__name__}): {error}")
        if args[:1] in (["restart"], ["step-done"]):
            return 1  # no restart, no next step: the run goes on to its end, which keeps the state
        if args[:1] == ["before"]:
            # No new start on an unknown answer: after a failed start the run's end keeps the state and decides;
            # before the first, nothing ran and nothing is left to keep: the job fails.
            restarting = len(args) == 2 and args[1].isdigit() and int(args[1]) > 0
            print("end" if restarting else f"exit {exit_codes.EXIT_FAILURE}", flush=True)
            return 0
        if args[:1] in (["end"], ["setup-failed"]) and len(args) >= 2 and args[1].isdigit():
            return int(args[1])
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
