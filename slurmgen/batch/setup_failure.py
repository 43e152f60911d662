"""A setup item that failed before the step's first start (spec field setup_fail_fast, templates/sbatch.sh.j2):
the run's end, recorded as a failed run, so that `slurmgen history` and `status` show a run that failed in setup
and which item, not a run that never ended. The batch shell has said the one line; nothing is requeued (the same
setup would fail again) and the resume state stays as it was."""

from __future__ import annotations

from collections.abc import Callable

from slurmgen import run_history
from slurmgen.interruption.states import Ended
from slurmgen.job_context.context import JobContext
from slurmgen.printable import printable
from slurmgen.requeue import record

WRITER = "batch-shell"


def failing(item: int, text: str, rc: int) -> str:
    """How the run history names the failure, as it names a failed rank (`rank 1 on node2 (exit 3)`), for history
    and status (`...; setup[1] `module load cuda` (exit 1) failed first`)."""
    return f"setup[{item}] `{printable(text)}` (exit {rc})"


def setup_failed(rc: int, item: int, text: str, ctx: JobContext, say: Callable[[str], None]) -> int:
    """Record the run's end (exit code ``rc``, no step); the batch shell's exit code, ``rc``."""
    if not ctx.log_dir:
        return rc
    try:
        record(ctx, WRITER, run_history.RUN_END, exit_code=rc, step_code=None, requeued=False,
               failing=failing(item, text, rc), ended=str(Ended.FAILED))  # fmt: skip
    except OSError as error:
        say(f"could not record the end of this run: {error}")
    return rc
