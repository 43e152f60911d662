"""The preemption signal's name, and blocking it across ``exec`` until the program is ready for it.

Slurm can deliver the ``--signal`` signal within milliseconds of the step's start: slurmctld checks for jobs near their
end every PERIODIC_TIMEOUT (30 s, src/slurmctld/slurmctld.h), so a job whose limit is within the lead time plus 30 s is
signalled at its first check (sbatch(1), --signal: "may be sent up to 60 seconds earlier"). Python's default action for
USR1/USR2 kills the process, so a signal that arrives before the user code installs its handler would end the task. The
entry point blocks the signal before ``exec``: the blocked mask survives ``execve`` (signal(7)), so the signal stays
pending until the preemption handler unblocks it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.signal_names import signal_name


def parse_signal_name(name: str) -> signal.Signals:
    """``"USR1"``, ``"SIGUSR1"``, ``"usr1"`` or ``"10"`` -> ``signal.SIGUSR1``; raises on anything else.

    The spelling rules are slurmgen.signal_names' (shared with the spec), so both sides read a name alike."""
    canonical = signal_name(name)
    if canonical is None:
        raise RuntimeSetupError(f"unknown signal {name!r} ({contract.PREEMPT_SIGNAL})")
    return signal.Signals[f"SIG{canonical}"]


def preemption_signal(mapping: JobContext | Mapping[str, str] | None = None) -> signal.Signals | None:
    """The signal named by SLURMGEN_PREEMPT_SIGNAL, or None when preemption handling is off."""
    name = JobContext.of(os.environ if mapping is None else mapping).preempt_signal
    return parse_signal_name(name) if name is not None else None


# Signals the task's supervisor takes itself (blocked, read with sigwaitinfo; slurmgen.task.supervisor): every
# one a step's tasks may be sent whose default action would end the supervisor. Not those that mean a bug in it
# (SEGV, BUS, ABRT, ...), and not CONT (Slurm sends it before every signal; its default action is harmless).
SUPERVISED = frozenset(
    getattr(signal, f"SIG{name}")
    for name in ("HUP", "INT", "QUIT", "ALRM", "TERM", "USR1", "USR2", "XCPU", "VTALRM", "PROF", "PWR", "CHLD")
    if hasattr(signal, f"SIG{name}")
)


def block_supervised(job: JobContext) -> signal.Signals | None:
    """Block what the supervisor handles, the preemption signal included. Returns the preemption signal or None."""
    sig = preemption_signal(job)
    signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISED | ({sig} if sig is not None else set()))
    return sig


def block_preemption_signal(mapping: JobContext | Mapping[str, str] | None = None) -> signal.Signals | None:
    """Block the preemption signal in this thread (and in what it ``exec``s). Returns it, or None if off."""
    sig = preemption_signal(mapping)
    if sig is not None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
    return sig
