"""The batch shell's preemption watcher: a preemption notice that never reached the shell is acted on anyway.

Slurm sends the `--signal` user signal at a preemption only with send_user_signal, and on Slurm 24.11 it reached
the batch shell in only 13 of 21 measured preemptions. Without it the job learns nothing until the TERM at the end
of its grace time, and the grace is lost. While the step runs, this process (started by the batch shell beside
the step, one per start of the step) looks at the job every SLURMGEN_PREEMPT_POLL seconds (10 by default: one
`scontrol show job`, a few milliseconds of slurmctld's time, once per job and not per task). When Slurm shows
PreemptTime and no notice has reached the shell (the signals it received are in LOG_DIR/.batch-signals), it sends
the preemption signal to the batch shell itself, whose trap then does what it does for Slurm's own signal. The
decision is slurmgen.interruption.decide_preempt_watch.

It asks once per look (no retries: the next look is the retry) and ends at once where there is no scontrol
(inside `slurmgen run` without one, or a container). The batch shell ends it when the step ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from slurmgen import contract, interruption
from slurmgen.runtime.env import job_key
from slurmgen.runtime.slurm_retry import Retry
from slurmgen.runtime.slurm_view import look

ONCE = Retry(tries=1, pauses=())


def received(log_dir: str) -> frozenset[str]:
    """The signals the batch shell recorded in this run (an unreadable file: none)."""
    try:
        text = (Path(log_dir) / contract.BATCH_SIGNALS_FILE).read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    return frozenset(text.split())


def poll_seconds(env: Mapping[str, str]) -> float:
    try:
        value = float(env.get(contract.PREEMPT_POLL, "") or contract.DEFAULT_PREEMPT_POLL)
    except ValueError:
        return contract.DEFAULT_PREEMPT_POLL
    return value if value > 0 else contract.DEFAULT_PREEMPT_POLL


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(
    shell_pid: int,
    preempt_signal: str,
    env: Mapping[str, str],
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the batch shell ends it with the step; so may Slurm
    key, log_dir = job_key(env), env.get("SLURMGEN_LOG_DIR", "")
    if key is None or not log_dir or shutil.which("scontrol") is None:
        return 0
    pause = poll_seconds(env)
    while True:
        sleep(pause)
        if not _alive(shell_pid):
            return 0
        got = received(log_dir)
        if interruption.decide_preempt_watch(False, True, got, preempt_signal) == interruption.WATCH_DONE:
            return 0
        view = look(key, retry=ONCE)
        preempted, running = (None, True) if view is None else (view.preempted(), view.running())
        action = interruption.decide_preempt_watch(preempted, running, received(log_dir), preempt_signal)
        if action == interruption.WATCH_DONE:
            return 0
        if action == interruption.WATCH_SIGNAL:
            assert view is not None and view.preempt_time is not None
            say(
                f"Slurm shows PreemptTime={view.preempt_time.isoformat()} for job {key} but no SIG{preempt_signal} "
                f"reached the batch shell: acting as if it had (the site's send_user_signal is off, or the signal "
                "was lost)"
            )
            os.kill(shell_pid, getattr(signal, f"SIG{preempt_signal}"))
            return 0
