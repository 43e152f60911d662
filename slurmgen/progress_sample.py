"""Rank 0's sampled progress in the run history (slurmgen/goodput/ reads it): the program's first step, then its
step and recent mean step time at 1, 2, 4, ... 32 s after that first step and every 60 s from then on.

Two writers, one per program: `Preemption` (slurmgen/runtime/preemption.py) and, for a program that prints its
step (spec section progress:), rank 0's task supervisor (slurmgen/task/output_progress.py); with progress: set,
Preemption leaves the sampling to the supervisor.

Cheap by design: `Preemption.should_stop()` calls `step()` at every step on every rank, and all it costs there is
one comparison of two floats; a sample is one append to rank 0's own history file, so the shared file system
sees at most one write a minute per job from it (no per-step write, no per-rank write). The program's end and
every stop record one more sample, the last (`last: true`): without it an ended job's last sample is one taken
mid-run (a 6 s run's last is at 4 s), and `slurmgen status` showed that step, a rate and an ETA for a job that had
ended. Standard library only (the task supervisor imports it).
"""

from __future__ import annotations

import time

from slurmgen import run_history
from slurmgen.job_context.context import JobContext

MAX_GAP = 60.0  # seconds between two samples once the run is under way


class ProgressSampler:
    def __init__(self, ctx: JobContext, rank: int, total_steps: int | None = None, printed: bool = False) -> None:
        """``printed``: the steps are the program's printed lines (task/output_progress.py), whose first says the step
        the program is at, with no count of the steps this start made: its first sample says so (`printed`)."""
        self._ctx = ctx
        self._printed = printed
        self._on = rank == 0 and bool(ctx.log_dir)
        self._total = total_steps
        self._next = 0.0 if self._on else float("inf")  # monotonic time of the next sample
        self._gap = 1.0
        self._last: tuple[int, float] | None = None  # (steps, monotonic time) at the previous sample

    def step(self, steps: int, now: float, step: int | None = None) -> None:
        """This process's ``steps`` so far (and the program's own ``step`` when it says it), at monotonic ``now``."""
        if now < self._next:
            return
        self._sample(steps, now, step)

    def last(self, steps: int, now: float, step: int | None = None) -> None:
        """The last sample of this start of the program: at its end, or at a stop (once; rank 0 only)."""
        if not self._on or self._last is None or self._next == float("inf"):
            return  # not rank 0, no step made, or done already (or the log directory failed)
        self._sample(steps, now, step, last=True)
        self._next = float("inf")

    def _sample(self, steps: int, now: float, step: int | None, last: bool = False) -> None:
        fields: dict[str, object] = {"steps": steps}
        if last:
            fields["last"] = True
        if step is not None:
            fields["step"] = step
        if self._total is not None:
            fields["total_steps"] = self._total
        if self._last is None:
            event = run_history.FIRST_STEP
            if self._printed:
                fields["printed"] = True
        else:
            event = run_history.PROGRESS
            done, then = steps - self._last[0], now - self._last[1]
            if done > 0:
                fields["step_seconds"] = round(then / done, 6)
        self._last = (steps, now)
        self._next = now + self._gap
        self._gap = min(self._gap * 2.0, MAX_GAP)
        try:
            run_history.append(self._ctx.log_dir or "", "rank0", event, self._ctx.run, time.time(), **fields)
        except OSError:  # a full or gone log directory must not stop the training
            self._next = float("inf")


def record_from_mark(ctx: JobContext, steps: int, step: int | None, when: float) -> None:
    """The last sample of a start whose program was killed before it could record one (SIGKILL, a signal at
    interpreter exit): rank 0's supervisor records what the program's node mark held, its steps and step at the
    mark's time ``when`` (epoch seconds), at most a tenth of a second before the program's end (MARK_PERIOD,
    progress_mark.ProgressMark). Without it, status and report showed the sample taken up to a minute before the
    kill as the job's last step."""
    if not ctx.log_dir:
        return
    fields: dict[str, object] = {"steps": steps, "last": True, "from_mark": True}
    if step is not None:
        fields["step"] = step
    if ctx.progress_total is not None:
        fields["total_steps"] = ctx.progress_total
    run_history.append(ctx.log_dir, "rank0", run_history.PROGRESS, ctx.run, when, **fields)
