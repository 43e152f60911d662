"""The job's steps (spec field steps): the command N times, one after another, in one allocation.

    python3 -m slurmgen.batch steps           # prints the index of the first step not done (0 to N)
    python3 -m slurmgen.batch step-done I RC  # after step I ended with RC: exit 0 to start step I + 1

Setup runs once per run, then each step is one pass of the step loop of today (restarts inside the allocation,
node checks, signals) with SLURMGEN_STEP_INDEX set. A step that completed is recorded in the run history
(`step-done`, with its index); a requeued run starts at the first step not recorded, so a preemption in step 2
resumes step 2, from its own resume state, never step 1. A step is done only when it exited 0 with no stop under
way: no stop recorded in it, no requeue asked for or made, no preemption signal (the program's own handler may save
and exit 0 on one); otherwise the run goes to its end, which decides as for any job, and the step runs again in
the next run. The resume state of a step that completed is removed before the next one starts: it has nothing
left to resume, and the next step must not load it. Each step decides on its own facts: the run history it reads
leaves out the stops, task exits and restarts of the steps before it (History.current_step).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from slurmgen import contract, run_history, trust
from slurmgen.job_context.context import JobContext

WRITER = "batch-shell"


def _say(line: str) -> None:
    print(f"slurmgen: {line}", file=sys.stderr, flush=True)


def first_step(ctx: JobContext) -> int:
    """The first step no run of this job completed (``ctx.steps`` when every one did)."""
    done = run_history.History.load(ctx.log_dir).steps_done()
    index = 0
    while index in done and index < ctx.steps:
        index += 1
    return index


def step_done(index: int, rc: int, ctx: JobContext, say: Callable[[str], None] = _say) -> int:
    """0 when step ``index`` completed and the next one starts; 1 when the run goes to its end (the last step,
    a failure, or a stop under way)."""
    from slurmgen.batch.resume_state import remove_state
    from slurmgen.batch.signals import STOP_ACTIONS
    from slurmgen.interruption.ending import run_record

    if rc != 0 or not ctx.log_dir:
        return 1
    history = run_history.History.load(ctx.log_dir).current_step(ctx.run)
    record = run_record(history, ctx.run, batch_stop_actions=STOP_ACTIONS)
    marker = os.path.join(ctx.state_dir or "", contract.requeue_marker_name(ctx.key)) if ctx.key else ""
    signals = [name for name, _ in ctx.signals] if ctx.preempt_signal is not None else []
    why = (
        f"a stop ({record.stop})" if record.stop else "the batch shell's stop" if record.batch_stop
        else f"a requeue by {record.requeued_by}" if record.requeued_by
        else f"SIG{signals[0]}" if signals
        else "a requeue asked for" if marker and trust.believed(marker, say) else None
    )  # fmt: skip
    shown = f"step {index + 1} of {ctx.steps}"
    if why is not None:
        say(f"{shown} exited 0 during {why}: the run's end decides; a requeued run starts at {shown} again")
        return 1
    run_history.append(ctx.log_dir, WRITER, run_history.STEP_DONE, ctx.run, time.time(), index=index,
                       steps=ctx.steps)  # fmt: skip
    if index + 1 >= ctx.steps:
        return 1  # the last one: the run's end follows (it removes the resume state of a completed job)
    if ctx.key is not None:
        remove_state(ctx, ctx.key, say, f"{shown} completed")
    say(f"{shown} completed; step {index + 2} starts")
    return 0
