"""Signals from the local runner and the fake srun (slurmgen.local.procs.signal_process), to real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

from slurmgen.local import procs

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _in_group(pgid: int) -> Callable[[], None]:
    """Popen's process_group= (new in 3.11; mypy checks for 3.10): setpgid(2) in the child before it runs."""
    return lambda: os.setpgid(0, pgid)


def test_a_signal_reaches_one_process_or_its_whole_group_and_says_when_it_is_gone() -> None:
    leader = subprocess.Popen(SLEEPER, preexec_fn=_in_group(0))  # its own group, in our session: others may join
    member = subprocess.Popen(SLEEPER, preexec_fn=_in_group(leader.pid))
    try:
        assert procs.signal_process(member.pid, signal.SIGTERM) is True
        assert member.wait(timeout=30) == -signal.SIGTERM
        assert leader.poll() is None  # one process: the rest of its group lives on
        member = subprocess.Popen(SLEEPER, preexec_fn=_in_group(leader.pid))
        assert procs.signal_process(leader.pid, signal.SIGKILL, group=True) is True
        assert (leader.wait(timeout=30), member.wait(timeout=30)) == (-signal.SIGKILL, -signal.SIGKILL)
        assert procs.signal_process(leader.pid, signal.SIGKILL) is False
        assert procs.signal_process(leader.pid, signal.SIGKILL, group=True) is False
    finally:
        for proc in (leader, member):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
