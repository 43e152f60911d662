"""What a signal that reached the batch shell means, and how it reaches the tasks (`batch signal SIG [PID]`).

The template passes two signals here, in the background so that the shell keeps waiting on the step:
- SIGTERM: srun answers SIGTERM by killing its tasks at once (src/srun/libsrun/srun_job.c, _srun_signal_mgr:
  "forcing job termination", then SIGKILL), so it is never sent to srun. While the job still runs (someone asked:
  `slurmgen cancel --signal TERM`), it goes to the step through Slurm (`scancel --signal=TERM <job>.<step>`):
  slurmstepd gives every task SIGTERM and srun returns when they exit. When Slurm itself is ending the job (time
  limit, scancel, a requeue) the tasks have it already. And: is Slurm preempting the job with PreemptMode=CANCEL,
  which never requeues? Then requeue it at once (batch/commands.py says why).
- the preemption signal, by `preemption.handler` (slurmgen/interruption/running.py `preemption_route`):
  runtime and program: forwarded to the step (srun passes it on to every task);
  requeue: the step is stopped with SIGTERM through Slurm, as above, and the job requeued when it has ended (or
  at the end of the window, if the program is still saving), within its budget;
  auto: runtime when the program constructed Preemption (rank 0 announces it in the run history). Until it has, the
  signal is forwarded anyway (every task keeps it blocked, harmless to any program) and the program gets
  `announce_wait` seconds to show that it takes part (a program may still be importing when the signal comes);
  then requeue, with one warning line naming the fix. If the step ends first, `end` decides (`unanswered`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from slurmgen import contract, interruption, run_history
from slurmgen.interruption.fallback import fallback_note, fallback_warning, wait_line
from slurmgen.interruption.requeue_route import slurm_ends_graced_preempted
from slurmgen.interruption.running import BeforeStepFacts, PreemptionSignalFacts, announce_wait_for
from slurmgen.interruption.running import window_end as policy_window_end
from slurmgen.interruption.states import BeforeStep, Phase, SignalRoute
from slurmgen.job_context.context import JobContext
from slurmgen.requeue import record, requeue_ended_job, requeue_this_job, signal_cause, site_facts
from slurmgen.slurm.view import look

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.view import SlurmView

WRITER = "batch-shell"
STOP_ACTIONS = "stop the step with SIGTERM and requeue"  # the batch shell's own stop, in the run history
STEP_LOOKUPS = 20  # tries to find the step in Slurm (a step that just started may not be registered yet)
LOOKUP_PAUSE = 0.5  # s
STOP_MARGIN = 10.0  # s before the end of the window at which a step still saving is left to Slurm's requeue
WATCH_PAUSE = 0.5  # s between looks at the step while it stops
ANNOUNCE_POLL = 1.0  # s between looks at the run history meanwhile


def announced(ctx: JobContext) -> bool:
    """Did this run's rank 0 construct Preemption (run_history.HANDLER)? Read afresh: rank 0 may just have."""
    return run_history.History.load(ctx.log_dir).announced(ctx.run)


def announce_wait(ctx: JobContext) -> float:
    """How long auto waits for the program to construct Preemption (announce_wait_for)."""
    return announce_wait_for(ctx.lead_seconds)


def on_signal(
    sig: str,
    step_pid: int | None,
    ctx: JobContext,
    say: Callable[[str], None],
    client: SlurmClient | None = None,
    *,
    kill: Callable[[int, int], None] = os.kill,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> int:
    import signal

    key = ctx.key
    if key is None:
        return 0
    view = look(key, client)
    handler = ctx.handler
    if sig == "TERM":
        _preempted_by_slurm(view, ctx, say, client, handler)
        if step_pid is not None and (view is None or view.running()):
            stop_step("TERM", step_pid, ctx, say, client, kill=kill, sleep=sleep)
        return 0
    if sig != ctx.preempt_signal or step_pid is None:
        return 0
    route = interruption.decide(PreemptionSignalFacts(handler, announced(ctx)))
    waited = None
    if route in (SignalRoute.FORWARD, SignalRoute.WAIT):
        with contextlib.suppress(ProcessLookupError):
            kill(step_pid, getattr(signal, f"SIG{sig}"))
        if route is SignalRoute.FORWARD:
            return 0
        waited = announce_wait(ctx)
        say(wait_line(waited))  # in the batch log, as the wait begins (docs/preemption.md, handler auto)
        # The run's end reads it: a step that ends 0 within this wait ended on its own (ending.decide_end).
        record(ctx, WRITER, run_history.AUTO_WAIT, sig=sig, seconds=waited)
        if _announced_within(waited, step_pid, ctx, kill=kill, sleep=sleep, clock=clock):
            return 0
    cause = signal_cause(ctx, None if view is None else view.preempted(), clock())
    auto = handler == contract.HANDLER_AUTO
    note = {"fallback": fallback_note(sig, waited)} if auto else {}
    record(ctx, WRITER, run_history.STOP, cause=cause, actions=STOP_ACTIONS, signals=[sig], **note)
    if auto:
        say(fallback_warning(sig, waited))
    say(f"SIG{sig} ({cause}): stopping the step with SIGTERM; the job is requeued once it has ended")
    stop_step("TERM", step_pid, ctx, say, client, kill=kill, sleep=sleep)
    deadline = window_end(ctx, view, cause)
    if deadline is not None:
        _watch(step_pid, deadline - STOP_MARGIN, cause, ctx, say, client, kill=kill, sleep=sleep, clock=clock)
    return 0


def _announced_within(
    seconds: float,
    step_pid: int,
    ctx: JobContext,
    *,
    kill: Callable[[int, int], None],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> bool:
    """True when the program constructed Preemption within ``seconds``, or the step ended first (then `end`
    decides: `unanswered`); False when the time is up."""
    deadline = clock() + seconds
    while True:
        if announced(ctx):
            return True
        try:
            kill(step_pid, 0)
        except ProcessLookupError:
            return True
        if clock() >= deadline:
            return False
        sleep(ANNOUNCE_POLL)


def _preempted_by_slurm(
    view: SlurmView | None, ctx: JobContext, say: Callable[[str], None], client: SlurmClient | None, handler: str
) -> None:
    """SIGTERM: is Slurm preempting the job? Record it; with PreemptMode=CANCEL, which never requeues, bring the
    work back now (not for preemption.handler program, whose program decides): a plain requeue, or where this
    Slurm would end a requeued run PREEMPTED anyway (CANCEL with a grace time, 24.05 and later) a continuation job,
    as the run's end would have made had it come first. This TERM is the grace's end: KillWait later Slurm kills
    every process of the job, the batch shell's end included."""
    if view is None or not view.preempted():
        return
    mode = view.mode(ctx.restart_count)
    record(ctx, WRITER, run_history.PREEMPTED, sig="TERM", mode=mode, state=view.state_name)
    if mode == "CANCEL" and ctx.preempt_signal and handler != contract.HANDLER_PROGRAM:
        assert ctx.key is not None
        history = run_history.History.load(ctx.log_dir)
        site = site_facts(history, ctx.run)
        if slurm_ends_graced_preempted(site):
            from slurmgen.batch.continuation import submit_continuation

            outcome = submit_continuation(ctx.key, run_history.PREEMPTION, ctx, by=WRITER, client=client)
        else:
            outcome = requeue_ended_job(
                ctx.key, run_history.PREEMPTION, ctx, by=WRITER, client=client, history=history, site=site
            )
        say(f"preempted with PreemptMode=CANCEL: {outcome.message}")


def stop_step(
    sig: str,
    step_pid: int,
    ctx: JobContext,
    say: Callable[[str], None],
    client: SlurmClient | None,
    *,
    kill: Callable[[int, int], None] = os.kill,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Give every task of the step started by ``step_pid`` (srun) the signal through slurmstepd (`scancel
    --signal=SIG <job>.<step>`), which lets srun return when they exit. True when Slurm took it."""
    import signal

    from slurmgen.errors import SlurmgenError
    from slurmgen.slurm.client import SlurmClient

    asker = client or SlurmClient(timeout=20.0)
    job = ctx.job_id
    for attempt in range(STEP_LOOKUPS):
        try:
            steps = [s for s in asker.steps(job) if s.state == "RUNNING" and (s.step.step or "").isdigit()]
            mine = [s for s in steps if s.srun_pid == step_pid] or (steps if len(steps) == 1 else [])
            for step in mine:
                asker.cancel(step.step, signal=sig)
        except SlurmgenError as exc:
            say(f"cannot signal the step through Slurm ({exc})")
            break
        if mine:
            return True
        if attempt + 1 < STEP_LOOKUPS:
            sleep(LOOKUP_PAUSE)
    if sig == "TERM":
        say("no step of this job found in Slurm to stop gracefully; sending SIGTERM to srun, which kills the tasks")
    with contextlib.suppress(ProcessLookupError):
        kill(step_pid, getattr(signal, f"SIG{sig}"))
    return False


def window_end(ctx: JobContext, view: SlurmView | None, cause: str) -> float | None:
    """When Slurm ends this run anyway (slurmgen.interruption.running.window_end): Slurm's EndTime while a preempted
    job runs, else the time limit from this job's start."""
    running_end = view.end_time.timestamp() if view is not None and view.end_time and view.running() else None
    return policy_window_end(cause, running_end, ctx.start_time, ctx.time_limit)


def _watch(
    step_pid: int,
    deadline: float,
    cause: str,
    ctx: JobContext,
    say: Callable[[str], None],
    client: SlurmClient | None,
    *,
    kill: Callable[[int, int], None],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    """Wait for the step to end (the batch shell's `end` requeues then). A program still saving at the end of the
    window would be killed and the job left ended: requeue it now, and Slurm stops it (SIGTERM, KillWait)."""
    while clock() < deadline:
        try:
            kill(step_pid, 0)
        except ProcessLookupError:
            return
        sleep(WATCH_PAUSE)
    outcome = requeue_this_job(cause, ctx, by=WRITER, client=client)
    say(f"the step is still stopping {STOP_MARGIN:g} s before the end of its window: {outcome.message}")


def before_step(attempt: int, ctx: JobContext, say: Callable[[str], None]) -> str:
    """`batch before ATTEMPT`: the batch shell holds signals at a start of the step; what it does is the policy's
    (slurmgen.interruption.decide_before_step). Printed for the shell to carry out: `start`, `end` (go to the
    run's end) or `exit CODE`."""
    signals = tuple(name for name, _ in ctx.signals)
    phase = Phase.RESTARTING if attempt > 0 else Phase.STARTING
    plan = interruption.decide(BeforeStepFacts(signals, phase))
    if plan.line:
        say(plan.line)
    return f"exit {plan.code}" if plan.action is BeforeStep.EXIT else str(plan.action)
