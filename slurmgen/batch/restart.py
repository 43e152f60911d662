"""The batch shell's restart inside the allocation: after a failed step, start it again without leaving the queue.

    python3 -m slurmgen.batch restart RC ATTEMPT   # after the step; exit 0: start the step again

The rendered script loops: start the step, wait, and on a non-zero exit ask here. The decision is
slurmgen.interruption.decide_restart (a crash is restarted within recovery.max_restarts; never while a stop or a
requeue is under way; never a failure that repeats). This module gathers its facts once and carries it out:
- the failure: the task that failed first in this start of the step (its supervisor's task-exit event, after the
  last restart), its own last line (the rank log's last line not written by slurmgen, e.g. a traceback's
  `ValueError: ...`; how it ended when it printed nothing: `exit 3`, `killed by SIGKILL`), and the newest save
  a restart would resume from (rank 0's save events and the resume state's files in the state directory);
- what is left of the step: srun has returned, which on Slurm means its tasks have ended (slurmstepd kills the
  step's processes when one task fails with --kill-on-bad-exit; with `srun: {kill-on-bad-exit: false}` srun
  returns once every task has ended of itself, and the first failure is still the one recorded first); the step is
  asked of Slurm until it has left, and killed (`scancel --signal=KILL <job>.<step>`) if it lingers. A step that
  Slurm still shows as running after that is never started again beside itself: the job ends instead.
The restart is recorded in the run history (event `restart`: cause, rank, node, exit code, error line, saved
state), which `slurmgen history` shows and the next decision reads for a repeated failure.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from slurmgen import contract, run_history, trust
from slurmgen.job_context.context import JobContext

if TYPE_CHECKING:
    from slurmgen.interruption.allocation import Failure
    from slurmgen.slurm.client import SlurmClient

WRITER = "batch-shell"
STEP_GONE_WAIT = 20.0  # seconds to wait for Slurm to show the failed step ended, before killing it
POLL = 0.5
TORCH_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")
# Set by the local run (slurmgen.local.runner) when the job runs on CPU, GPUs asked for or not: a failure for want
# of a GPU is then not restarted (interruption.decide_restart).


def _say(line: str) -> None:
    print(f"slurmgen: {line}", file=sys.stderr, flush=True)


def restart(
    rc: int,
    attempt: int,
    ctx: JobContext,
    say: Callable[[str], None] = _say,
    client: SlurmClient | None = None,
) -> int:
    """0 when the step is to be started again (the restart is recorded), 1 when the run goes on to its end."""
    from slurmgen import interruption
    from slurmgen.batch.signals import STOP_ACTIONS
    from slurmgen.interruption.allocation import RestartFacts
    from slurmgen.interruption.ending import run_record
    from slurmgen.interruption.states import RestartCause

    log_dir, key = ctx.log_dir, ctx.key
    max_restarts = ctx.max_restarts
    if rc == 0 or not log_dir or key is None or max_restarts == 0:
        return 1
    run = ctx.run
    # One read for the whole decision, as the current step (spec field steps) sees it: the restarts and failures
    # of the steps that completed before it are theirs, and recovery.max_restarts counts per step.
    history = run_history.History.load(log_dir).current_step(run)
    restarts = history.of_run(run, run_history.RESTART)
    since = float(restarts[-1].get("time") or 0.0) if restarts else 0.0
    record = run_record(history, run, batch_stop_actions=STOP_ACTIONS)
    marker = os.path.join(ctx.state_dir or "", contract.requeue_marker_name(key))
    signals = tuple(name for name, _ in ctx.signals)
    own_stop = bool(record.stop) and not _casualty_stop(history, run, since, signals, not ctx.run_on_bad_exit)
    facts = RestartFacts(
        step_code=rc,
        signals=signals,
        stopping=bool(own_stop or record.batch_stop or record.requeued_by) or trust.believed(marker, say),
        restarts=len(restarts),
        max_restarts=max_restarts,
        failure=hang_of(hangs, ctx, history)
        if (hangs := hang_events(history, run, since))
        else failure_of(history, run, since, rc, ctx),
        previous=None if not restarts else _failure_from(restarts[-1]),
        event=RestartCause.HANG if hangs else RestartCause.CRASH,
        no_gpu=ctx.local_no_gpu,
    )
    plan = interruption.decide(facts)
    if plan.line:
        say(plan.line)
    if plan.cause is RestartCause.REPEATED:
        f = facts.failure
        run_history.append(log_dir, WRITER, run_history.REPEATED, run, time.time(), who=f.who, error=f.error)
    if not plan.restart:
        return 1
    if not _step_gone(ctx, say, client):
        say("the failed step is still running in Slurm: it is not started again beside itself")
        return 1
    f, now = facts.failure, time.time()
    # Time lost: the work since the newest save (or since this start of the step, when nothing was saved in it)
    # plus the time from the failure to here; the next start's own start-up comes on top.
    started = max(since, history.last_time(run, run_history.RUN_START), history.last_time(run, run_history.STEP_DONE))
    begun = max(started, _saved_at(history, ctx))
    lost = round(now - begun, 1) if begun else None
    steps = steps_lost(log_dir, history, run, started)
    reached = step_reached(history, run, started)
    run_history.append(log_dir, WRITER, run_history.RESTART, run, now, cause=plan.cause, attempt=attempt + 1,
                       who=f.who, error=f.error, reason=f.reason, saved=f.saved, step_code=rc, lost_seconds=lost,
                       steps_lost=steps, **({} if reached is None else {"reached_step": reached}),
                       **_where(history, run, since, not ctx.run_on_bad_exit, hangs))  # fmt: skip
    return 0


def steps_lost(log_dir: str, history: run_history.History, run: int, started: float) -> int | None:
    """The steps this start of the step made that the restart does not keep: the step its ranks reached minus the
    step of its newest save (rank 0's save event; none in this start: it resumed from what the start before saved,
    so every step it made is lost). None when nothing tells the steps made (a program that does not call
    `should_stop()` and prints no progress line).

    The step reached is the later of rank 0's progress mark in the log directory (else any rank's: task/watchdog.py)
    and rank 0's newest progress sample of this start in the run history. The mark is rewritten at most every
    SHARED_MARK_PERIOD seconds, so a program that hung or died a few seconds after it left it far behind; the
    sample its supervisor recorded at the program's end (its last step, or what its node mark held when it was
    killed) is at most a tenth of a second old."""
    from slurmgen.progress_mark import PROGRESS_DIR, steps_marked

    reached = steps_marked(log_dir, 0, started)
    if reached is None:
        try:
            names = os.listdir(os.path.join(log_dir, PROGRESS_DIR))
        except OSError:
            names = []
        marked = [steps_marked(log_dir, int(n[5:]), started) for n in names if n[5:].isdigit()]
        reached = max((m for m in marked if m is not None), default=None)
    sampled = [n for n in (run_history.count(e.get("steps")) for e in _samples(history, run, started)) if n is not None]
    if sampled:
        reached = max(reached or 0, max(sampled))
    saves = [e for e in history.of_run(run, run_history.SAVE)
             if float(e.get("time") or 0.0) >= started and isinstance(e.get("steps"), int)]  # fmt: skip
    saved = int(saves[-1]["steps"]) if saves else 0
    return None if reached is None else max(reached - saved, 0)


def _samples(history: run_history.History, run: int, started: float) -> list[Mapping[str, Any]]:
    """Rank 0's progress samples of this start of the step, oldest first."""
    return [e for e in history.of_run(run) if e.get("event") in (run_history.FIRST_STEP, run_history.PROGRESS)
            and float(e.get("time") or 0.0) >= started]  # fmt: skip


def step_reached(history: run_history.History, run: int, started: float) -> int | None:
    """The program's own step at the newest progress sample of this start (Preemption's `should_stop(step=)`, a
    progress line, or what the node mark held when it was killed); None when it says no step. With the next
    start's first sample it tells the steps done again (run_history.steps_lost)."""
    samples = _samples(history, run, started)
    return run_history.count(samples[-1].get("step")) if samples else None


def failure_of(history: run_history.History, run: int, since: float, rc: int, ctx: JobContext) -> Failure:
    """The failure of this start of the step: who failed first, its own last line, the save it could resume from."""
    from slurmgen.batch import task_failure
    from slurmgen.interruption.allocation import Failure, failure_reason

    first = task_failure.first_failure(history.since(since), run, not ctx.run_on_bad_exit)
    who = f"the step (exit {rc})" if first is None else first.describe()
    error = ""
    if first is not None:
        own = [line.strip() for line in task_failure.tail(first.log, 40) if line.strip()]
        own = [line for line in own if not line.startswith("slurmgen:")]
        # torch prefixes a rank's traceback lines with `[rankN]: `: the same error on another rank is the same.
        error = TORCH_RANK_PREFIX.sub("", own[-1])[:300] if own else ""
        # A program that printed nothing of its own: how it ended is its error line (`sys.exit(3)` twice is a bug).
        error = error or (f"killed by SIG{first.signal}" if first.signal else f"exit {first.exit_code}")
        error = first.raised or error  # the exception it raised, as its start-up hook recorded it
    where = None
    if first is not None:
        where = task_failure.program_frame(task_failure.tail(first.log, task_failure.TRACEBACK_LINES), os.getcwd())
    reason = failure_reason(error, None if first is None else first.raised, first is not None)
    return Failure(who, error, saved_point(history, ctx), reason, where or "")


def hang_events(history: run_history.History, run: int, since: float) -> list[Mapping[str, Any]]:
    """The hang watchdog's events of this start of the step (task/watchdog.py), the likeliest cause first: a rank
    whose program was stopped (it cannot run), then one not waiting on its peers in torch.distributed (the others
    wait in a collective for it), then the oldest last progress."""
    mine = [e for e in history.of_run(run, run_history.HANG) if float(e.get("time") or 0.0) >= since]
    return sorted(mine, key=lambda e: (not e.get("stopped"), bool(e.get("waiting")),
                                       float(e.get("progressed") or 0.0), int(e.get("rank") or 0)))  # fmt: skip


def hang_cause(hangs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ranks that hung, not those waiting on them (``hangs`` in hang_events' order): the stopped programs;
    else the ranks not waiting in a collective while others were; else those whose progress stopped first."""
    first = hangs[0]
    if first.get("stopped"):
        return [e for e in hangs if e.get("stopped")]
    if not first.get("waiting") and any(e.get("waiting") for e in hangs):
        return [e for e in hangs if not e.get("waiting")]
    oldest = float(first.get("progressed") or 0.0)
    return [e for e in hangs if float(e.get("progressed") or 0.0) - oldest < 1.0]


def hang_of(hangs: Sequence[Mapping[str, Any]], ctx: JobContext, history: run_history.History) -> Failure:
    """A hang as a failure: the ranks that hung (hang_cause), and the function the first one hangs in."""
    from slurmgen.interruption.allocation import Failure

    ranks = hang_cause(hangs)
    stamp = time.strftime("%H:%M:%S", time.localtime(float(ranks[0].get("progressed") or 0.0)))
    names = ", ".join(f"rank {e.get('rank')} on {e.get('node')}" for e in ranks)
    why = " (its program was stopped)" if ranks[0].get("stopped") else ""
    if not why and ranks[0].get("waiting") is False and len(ranks) < len(hangs):
        why = " (the other ranks waited on it in torch.distributed)"
    who = f"no progress on any rank; stopped first (at {stamp}): {names}{why}; stacks in {ranks[0].get('stacks')}"
    where = hung_in(str(ranks[0].get("stacks") or ""))
    return Failure(who, f"hang in {where}" if where else "hang", saved_point(history, ctx))


def hung_in(stacks_path: str) -> str:
    """The innermost function of the main thread in the last dump of a stacks file (py-spy's, else the program's
    own faulthandler dump: slurmgen/stack_dump.py), or ""."""
    from slurmgen.stack_dump import innermost_function

    try:
        with open(stacks_path, encoding="utf-8", errors="replace") as handle:
            return innermost_function(handle.read())
    except OSError:
        return ""


def saved_point(history: run_history.History, ctx: JobContext) -> str:
    """What a restart resumes from, as a comparable text: rank 0's saves so far and the newest resume-state file."""
    saves = history.all(run_history.SAVE)
    newest = 0
    state_dir, key = ctx.state_dir, ctx.key
    if state_dir and key:
        try:
            with os.scandir(state_dir) as entries:
                mine = [e for e in entries if e.name.startswith(f"{key}.") and not e.name.endswith(".requeue")]
                newest = max((e.stat().st_mtime_ns for e in mine), default=0)
        except OSError:
            pass
    if not saves and not newest:
        return ""
    return f"saves={len(saves)} state={newest}"


def _saved_at(history: run_history.History, ctx: JobContext) -> float:
    """When the newest save was made (rank 0's save events, the resume state's files), 0.0 if none."""
    times = [float(e.get("time") or 0.0) for e in history.all(run_history.SAVE)]
    state_dir, key = ctx.state_dir, ctx.key
    if state_dir and key:
        try:
            with os.scandir(state_dir) as entries:
                times += [e.stat().st_mtime for e in entries if e.name.startswith(f"{key}.")]
        except OSError:
            pass
    return max(times, default=0.0)


def _casualty_stop(
    history: run_history.History, run: int, since: float, signals: tuple[str, ...], step_kills: bool
) -> bool:
    """Whether this start's stop is one a failed task's --kill-on-bad-exit SIGTERM caused (interruption/casualty.py);
    never without --kill-on-bad-exit (``step_kills`` false): srun then sends the others nothing."""
    from slurmgen.interruption.casualty import TaskEnd, exit_records, stop_of_a_casualty

    stops = [float(e.get("time") or 0.0) for e in history.of_run(run, run_history.STOP)]
    exits = exit_records(history.since(since), run)
    ends = []
    for e in exits:
        try:
            raised = e.get("raised_at")
            ends.append(TaskEnd(int(e["rank"]), int(e["exit_code"]), e.get("signal") or None, float(e["time"]),
                                float(raised) if isinstance(raised, (int, float)) else None))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            continue
    return stop_of_a_casualty(min((t for t in stops if t >= since), default=None), ends, signals, step_kills)


def _where(
    history: run_history.History, run: int, since: float, step_kills: bool, hangs: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Where the step failed: the first task that failed; after a hang, the rank that hung (not the first of the
    tasks the watchdog killed)."""
    from slurmgen.batch import task_failure

    first = task_failure.first_failure(history.since(since), run, step_kills)
    found = {} if first is None else {"rank": first.rank, "node": first.node, "exit_code": first.exit_code,
                                      "failed_at": first.time}  # fmt: skip
    if hangs:
        cause = hang_cause(hangs)[0]
        found.update(rank=cause.get("rank"), node=cause.get("node"))
    return found


def _failure_from(event: Mapping[str, Any]) -> Failure:
    from slurmgen.interruption.allocation import Failure

    return Failure(str(event.get("who") or ""), str(event.get("error") or ""), str(event.get("saved") or ""))


def _step_gone(
    ctx: JobContext,
    say: Callable[[str], None],
    client: SlurmClient | None,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """True once Slurm shows no running srun step of this job (the failed one is gone); kills a lingering one."""
    from slurmgen.errors import SlurmgenError
    from slurmgen.slurm.client import SlurmClient

    asker = client or SlurmClient(timeout=10.0)
    job = ctx.job_id
    killed = False
    deadline = time.monotonic() + STEP_GONE_WAIT
    while True:
        try:
            left = [s for s in asker.steps(job) if s.state == "RUNNING" and (s.step.step or "").isdigit()]
        except SlurmgenError as exc:
            # srun has returned, so its tasks have ended: Slurm not answering is no evidence of a survivor.
            say(f"cannot ask Slurm whether the failed step has ended ({exc}); srun has returned, going on")
            return True
        if not left:
            return True
        if time.monotonic() >= deadline:
            if killed:
                return False
            for step in left:
                say(f"step {step.step} is still running {STEP_GONE_WAIT:.0f} s after srun returned: killing it")
                try:
                    asker.cancel(step.step, signal="KILL")
                except SlurmgenError as exc:
                    say(f"cannot kill step {step.step} ({exc})")
            killed = True
            deadline = time.monotonic() + STEP_GONE_WAIT
        sleep(POLL)
