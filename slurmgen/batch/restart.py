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
  step's processes when one task fails with --kill-on-bad-exit); the step is asked of Slurm until it has left,
  and killed (`scancel --signal=KILL <job>.<step>`) if it lingers. A step that Slurm still shows as running after
  that is never started again beside itself: the job ends instead.
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

from slurmgen import contract, run_history

if TYPE_CHECKING:
    from slurmgen.interruption import Failure
    from slurmgen.slurm.client import SlurmClient

WRITER = "batch-shell"
STEP_GONE_WAIT = 20.0  # seconds to wait for Slurm to show the failed step ended, before killing it
POLL = 0.5
TORCH_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")


def _say(line: str) -> None:
    print(f"slurmgen: {line}", file=sys.stderr, flush=True)


def restart(
    rc: int,
    attempt: int,
    env: Mapping[str, str],
    say: Callable[[str], None] = _say,
    client: SlurmClient | None = None,
) -> int:
    """0 when the step is to be started again (the restart is recorded), 1 when the run goes on to its end."""
    from slurmgen import interruption
    from slurmgen.batch.signals import STOP_ACTIONS
    from slurmgen.job_env import job_key, restart_count

    log_dir, key = env.get(contract.LOG_DIR), job_key(env)
    max_restarts = _int(env.get(contract.MAX_RESTARTS))
    if rc == 0 or not log_dir or key is None or max_restarts == 0:
        return 1
    run = restart_count(env) + 1
    events = run_history.read(log_dir)
    restarts = [e for e in events if e.get("run") == run and e.get("event") == run_history.RESTART]
    since = float(restarts[-1].get("time") or 0.0) if restarts else 0.0
    record = interruption.run_record(events, run, batch_stop_actions=STOP_ACTIONS)
    marker = os.path.join(env.get(contract.STATE_DIR, ""), contract.requeue_marker_name(key))
    facts = interruption.RestartFacts(
        step_code=rc,
        signals=tuple(item.partition("@")[0] for item in env.get(contract.SIGNALS, "").split()),
        stopping=bool(record.stop or record.batch_stop or record.requeued_by) or os.path.exists(marker),
        restarts=len(restarts),
        max_restarts=max_restarts,
        failure=hang_of(hangs, env, events)
        if (hangs := hang_events(events, run, since))
        else failure_of(events, run, since, rc, env),
        previous=None if not restarts else _failure_from(restarts[-1]),
        event=interruption.RESTART_HANG if hangs else interruption.RESTART_CRASH,
    )
    plan = interruption.decide_restart(facts)
    if plan.line:
        say(plan.line)
    if plan.cause == interruption.REPEATED:
        f = facts.failure
        run_history.append(log_dir, WRITER, run_history.REPEATED, run, time.time(), who=f.who, error=f.error)
    if not plan.restart:
        return 1
    if not _step_gone(env, say, client):
        say("the failed step is still running in Slurm: it is not started again beside itself")
        return 1
    f, now = facts.failure, time.time()
    # Time lost: the work since the newest save (or since this start of the step, when nothing was saved in it)
    # plus the time from the failure to here; the next start's own start-up comes on top.
    begun = max(since, _saved_at(events, env), _run_start(events, run))
    lost = round(now - begun, 1) if begun else None
    run_history.append(log_dir, WRITER, run_history.RESTART, run, now, cause=plan.cause, attempt=attempt + 1,
                       who=f.who, error=f.error, saved=f.saved, step_code=rc, lost_seconds=lost,
                       **_where(events, run, since))  # fmt: skip
    return 0


def failure_of(events: Sequence[Mapping[str, Any]], run: int, since: float, rc: int, env: Mapping[str, str]) -> Failure:
    """The failure of this start of the step: who failed first, its own last line, the save it could resume from."""
    from slurmgen.batch import task_failure
    from slurmgen.interruption import Failure

    first = task_failure.first_failure([e for e in events if float(e.get("time") or 0.0) >= since], run)
    who = f"the step (exit {rc})" if first is None else first.describe()
    error = ""
    if first is not None:
        own = [line.strip() for line in task_failure.tail(first.log, 40) if line.strip()]
        own = [line for line in own if not line.startswith("slurmgen:")]
        # torch prefixes a rank's traceback lines with `[rankN]: `: the same error on another rank is the same.
        error = TORCH_RANK_PREFIX.sub("", own[-1])[:300] if own else ""
        # A program that printed nothing of its own: how it ended is its error line (`sys.exit(3)` twice is a bug).
        error = error or (f"killed by SIG{first.signal}" if first.signal else f"exit {first.exit_code}")
    return Failure(who, error, saved_point(events, env))


def hang_events(events: Sequence[Mapping[str, Any]], run: int, since: float) -> list[Mapping[str, Any]]:
    """The hang watchdog's events of this start of the step (task/watchdog.py), the rank that stopped first
    (the oldest last progress) first."""
    mine = [e for e in events if e.get("run") == run and e.get("event") == run_history.HANG
            and float(e.get("time") or 0.0) >= since]  # fmt: skip
    return sorted(mine, key=lambda e: (float(e.get("progressed") or 0.0), int(e.get("rank") or 0)))


def hang_of(hangs: Sequence[Mapping[str, Any]], env: Mapping[str, str], events: Sequence[Mapping[str, Any]]) -> Failure:
    """A hang as a failure: the ranks that stopped progressing first, and the function the first one hangs in."""
    from slurmgen.interruption import Failure

    first = float(hangs[0].get("progressed") or 0.0)
    ranks = [e for e in hangs if float(e.get("progressed") or 0.0) - first < 1.0]
    names = ", ".join(f"rank {e.get('rank')} on {e.get('node')}" for e in ranks)
    stamp = time.strftime("%H:%M:%S", time.localtime(first))
    who = f"no progress on any rank; stopped first (at {stamp}): {names}; stacks in {hangs[0].get('stacks')}"
    where = hung_in(str(hangs[0].get("stacks") or ""))
    return Failure(who, f"hang in {where}" if where else "hang", saved_point(events, env))


def hung_in(stacks_path: str) -> str:
    """The innermost function of the main thread in the last py-spy dump of a stacks file, or ""."""
    try:
        with open(stacks_path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return ""
    part = text.rsplit('"MainThread"', 1)
    if len(part) < 2:
        return ""
    frames = [line.strip() for line in part[1].splitlines()[1:] if line.startswith("    ")]
    return frames[0].split(" (", 1)[0] if frames else ""


def saved_point(events: Sequence[Mapping[str, Any]], env: Mapping[str, str]) -> str:
    """What a restart resumes from, as a comparable text: rank 0's saves so far and the newest resume-state file."""
    from slurmgen.job_env import job_key

    saves = [e for e in events if e.get("event") == run_history.SAVE]
    newest = 0
    state_dir, key = env.get(contract.STATE_DIR), job_key(env)
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


def _saved_at(events: Sequence[Mapping[str, Any]], env: Mapping[str, str]) -> float:
    """When the newest save was made (rank 0's save events, the resume state's files), 0.0 if none."""
    from slurmgen.job_env import job_key

    times = [float(e.get("time") or 0.0) for e in events if e.get("event") == run_history.SAVE]
    state_dir, key = env.get(contract.STATE_DIR), job_key(env)
    if state_dir and key:
        try:
            with os.scandir(state_dir) as entries:
                times += [e.stat().st_mtime for e in entries if e.name.startswith(f"{key}.")]
        except OSError:
            pass
    return max(times, default=0.0)


def _run_start(events: Sequence[Mapping[str, Any]], run: int) -> float:
    starts = [
        float(e.get("time") or 0.0) for e in events if e.get("run") == run and e.get("event") == run_history.RUN_START
    ]
    return max(starts, default=0.0)


def _where(events: Sequence[Mapping[str, Any]], run: int, since: float) -> dict[str, Any]:
    from slurmgen.batch import task_failure

    first = task_failure.first_failure([e for e in events if float(e.get("time") or 0.0) >= since], run)
    if first is None:
        return {}
    return {"rank": first.rank, "node": first.node, "exit_code": first.exit_code, "failed_at": first.time}


def _failure_from(event: Mapping[str, Any]) -> Failure:
    from slurmgen.interruption import Failure

    return Failure(str(event.get("who") or ""), str(event.get("error") or ""), str(event.get("saved") or ""))


def _step_gone(
    env: Mapping[str, str],
    say: Callable[[str], None],
    client: SlurmClient | None,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """True once Slurm shows no running srun step of this job (the failed one is gone); kills a lingering one."""
    from slurmgen.errors import SlurmgenError
    from slurmgen.slurm.client import SlurmClient

    asker = client or SlurmClient(timeout=10.0)
    job = env.get("SLURM_JOB_ID", "")
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


def _int(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0
