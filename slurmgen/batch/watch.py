"""The batch shell's preemption watcher: a preemption notice that never reached the shell is acted on anyway.

    python3 -m slurmgen.batch watch SHELL_PID SIG   # started by the batch shell, once per run

Slurm sends the `--signal` user signal at a preemption only with send_user_signal, and on Slurm 24.11 it reached
the batch shell in only 13 of 21 measured preemptions. Without it the job learns nothing until the TERM at the end
of its grace time, and the grace is lost. This process (one per run of the job, beside the batch shell) looks at
the job every SLURMGEN_PREEMPT_POLL seconds (10 by default: one `scontrol show job`, a few milliseconds of
slurmctld's time, once per job and not per task). When Slurm shows PreemptTime and no notice has reached the shell
(the signals it received are in LOG_DIR/.batch-signals), it sends the preemption signal to the batch shell itself,
whose trap then does what it does for Slurm's own signal. The decisions are slurmgen.interruption's
preempt_watch_needed and decide_preempt_watch.

What it costs and how it ends:
- It ends at once where it has nothing to wait for: no scontrol (a container) or `slurmgen run` (whose emulated
  preemption never loses its signal); after its first pause where the site's recorded preemption leaves no grace
  time (PreemptMode OFF or SUSPEND, GraceTime 0). Until that pause it has imported only what those first checks
  need: it starts beside the step's ranks, whose start-up its CPU would slow (bench/startup.py).
- It never outlives the batch shell: the shell kills it after the step's last start; if the shell itself dies
  (SIGKILL at the end of the grace, or any other way) the kernel sends it SIGKILL (prctl PR_SET_PDEATHSIG, see
  prctl(2)), and each look checks that its parent is still the shell.
- Slurm not answering (a timeout, an error) is no evidence of a preemption: it sends nothing, says so once, and
  asks again at the next look (no retries: the next look is the retry).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from slurmgen import contract
from slurmgen.job_context.context import JobContext

MIN_POLL = 0.1  # seconds; below this the looks would cost slurmctld more than a lost grace costs the job
MAX_POLL = 300.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def received(log_dir: str) -> frozenset[str]:
    """The signals the batch shell recorded in this run (an unreadable file: none)."""
    try:
        text = (Path(log_dir) / contract.BATCH_SIGNALS_FILE).read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    return frozenset(text.split())


def poll_seconds(source: JobContext) -> float:
    value = source.preempt_poll
    if value is None or not value > 0:
        return contract.DEFAULT_PREEMPT_POLL
    return min(max(value, MIN_POLL), MAX_POLL)


def die_with_parent(shell_pid: int) -> bool:
    """Ask the kernel for SIGKILL when the parent (the batch shell) dies; False if it is not the parent any more
    (it died before the request, or this process was not started by it)."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the check of the parent at each look remains
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == shell_pid


def site_of_run(log_dir: str, ctx: JobContext) -> Mapping[str, object]:
    """What the site does on preemption, as this run's start recorded it (empty if unknown)."""
    from slurmgen import run_history

    return run_history.History.load(log_dir).site(ctx.run)


def watch(
    shell_pid: int,
    preempt_signal: str,
    ctx: JobContext,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the batch shell ends it with the step; so may Slurm
    if not die_with_parent(shell_pid):
        return 0
    key, log_dir = ctx.key, ctx.log_dir or ""
    if key is None or not log_dir or shutil.which("scontrol") is None:
        return 0
    if ctx.local_dir:
        return 0  # `slurmgen run`: its emulated preemption always delivers the signal; each look would cost a process
    pause, said_unsure = poll_seconds(ctx), False
    # The first pause before anything costly: the policy, the run history and Slurm's client are about 50 ms of
    # CPU (bench/startup.py), spent once the step has started rather than beside its ranks' start-up. A site
    # whose preemption leaves no grace time is known after that pause, when the watcher ends.
    sleep(pause)
    from slurmgen import interruption
    from slurmgen.interruption.allocation import WatchFacts, preempt_watch_needed
    from slurmgen.interruption.states import WatchStep
    from slurmgen.slurm.retry import Retry
    from slurmgen.slurm.view import look

    if not preempt_watch_needed(site_of_run(log_dir, ctx)):
        return 0
    once = Retry(tries=1, pauses=())
    while True:
        if os.getppid() != shell_pid:
            return 0
        got = received(log_dir)
        if interruption.decide(WatchFacts(False, True, got, preempt_signal)) is WatchStep.DONE:
            return 0
        view = look(key, retry=once)
        if view is None and not said_unsure:
            said_unsure = True
            say(f"the preemption watcher cannot ask Slurm about job {key} (scontrol failed or timed out): no "
                "preemption is assumed; it keeps asking quietly")  # fmt: skip
        preempted, running = (None, True) if view is None else (view.preempted(), view.running())
        action = interruption.decide(WatchFacts(preempted, running, received(log_dir), preempt_signal))
        if action is WatchStep.DONE:
            return 0
        if action is WatchStep.SIGNAL:
            assert view is not None and view.preempt_time is not None
            say(
                f"Slurm shows PreemptTime={view.preempt_time.isoformat()} for job {key} but no SIG{preempt_signal} "
                f"reached the batch shell: acting as if it had (the site's send_user_signal is off, or the signal "
                "was lost)"
            )
            os.kill(shell_pid, getattr(signal, f"SIG{preempt_signal}"))
            return 0
        sleep(pause)


def _say(line: str) -> None:
    print(f"slurmgen: {line}", file=sys.stderr, flush=True)


def main(shell_pid: int, preempt_signal: str) -> int:
    """``python3 -m slurmgen.batch watch SHELL_PID SIG``, which batch/__main__.py brings here without the other
    commands' imports (the watcher starts beside the step's ranks), with commands.main's error boundary."""
    try:
        return watch(shell_pid, preempt_signal, JobContext.from_environ(os.environ), _say)
    except Exception as error:  # the batch shell must go on (as in commands.main)
        _say(f"internal error in the batch shell's watch step ({type(error).__name__}): {error}")
        return 0
