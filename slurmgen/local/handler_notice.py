"""What preemption.handler auto does to a program without Preemption, said on the local run's terminal.

Under auto the batch shell forwards the preemption signal and waits for the program to construct slurmgen's
Preemption (a quarter of the lead time, at most a minute: slurmgen/batch/signals.py) before it stops the step with
SIGTERM and requeues. An unmodified program's stop is so delayed by up to a minute; the batch log says why, but
nobody running locally looks there. The runner says it too, when it sends the signal and again when the run has
ended.
"""

from __future__ import annotations

from slurmgen import contract, run_history
from slurmgen.spec.model import JobSpec


def auto_notice(spec: JobSpec, log_dir: str, run: int, sig: str) -> str | None:
    """The line for signal ``sig`` reaching the batch shell in run ``run``; None when auto will not wait (another
    handler, another signal, or the program has constructed Preemption already)."""
    from slurmgen.interruption.fallback import wait_line
    from slurmgen.interruption.running import announce_wait_for

    pre = spec.preemption
    if pre.handler != contract.HANDLER_AUTO or sig != pre.signal:
        return None
    if run_history.History.load(log_dir).announced(run):
        return None
    return wait_line(announce_wait_for(pre.lead_time))  # the batch log says the same (batch/signals.py)


def fallback_lines(log_dir: str, run: int) -> list[str]:
    """auto's stop of a program without Preemption in run ``run``, as the run history keeps it (STOP's fallback)."""
    found = [r for r in run_history.History.load(log_dir).runs() if r.run == run and r.fallback is not None]
    return [f"run {r.run}: {r.fallback}" for r in found]
