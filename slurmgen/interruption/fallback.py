"""The preemption signal that no one took: what auto's fallback says when it stops and requeues a program that never
constructed Preemption (`fallback_warning`, and `fallback_note` for the run history), whether the end of a failed
step still owes the job that fallback (`unanswered`), and the warning when the signal reached a job under handler
runtime whose program never took it (`never_taken`).

Standard library and the run history's vocabulary only.
"""

from __future__ import annotations

from slurmgen import contract
from slurmgen.interruption.ending import RunRecord


def fallback_warning(sig: str, waited: float | None) -> str:
    """What auto says when it stops and requeues a program that never constructed Preemption."""
    within = f" within {waited:g} s of SIG{sig}" if waited is not None else ""
    return (
        f"warning: the program did not construct slurmgen's Preemption{within}, so SIG{sig} cannot make it save: "
        "stopping the step with SIGTERM and requeueing the job (preemption.handler: auto); construct Preemption in "
        f"the program to save first, or set preemption.handler: program if it handles SIG{sig} itself, or requeue "
        "if it resumes from its own checkpoints"
    )


def wait_line(seconds: float) -> str:
    """What auto says when the preemption signal came and the program has not constructed Preemption yet: the
    batch log says it as the wait begins, and `slurmgen run`'s terminal too (local/handler_notice.py)."""
    return (
        "preemption.handler auto: the program has not constructed slurmgen's Preemption, so the batch shell waits "
        f"up to {seconds:g} s for it, then stops the step with SIGTERM and requeues; set preemption.handler: "
        "requeue to stop an unmodified program at once"
    )


def fallback_note(sig: str, waited: float | None) -> str:
    """auto's fallback as the run history keeps it (STOP's `fallback`), for `slurmgen history`, `status` and the
    local run's terminal: the batch log alone is where nobody looks."""
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
