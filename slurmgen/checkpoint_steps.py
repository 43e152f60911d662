"""The program's own saves against its progress: the step at a save, and the start that began far behind it.

Shared by rank 0's supervisor, which says the silent loss at the first progress of a start
(task/checkpoint_watch.py), and by `slurmgen report` (goodput/program_saves.py). Pure: run-history events in.
Standard library only (Python 3.9: the supervisor imports it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from slurmgen import run_history
from slurmgen.progress_mark import MARK_PERIOD

TYPE_CHECKING = False  # typing stays unloaded: the supervisor imports this
if TYPE_CHECKING:
    from typing import Any

CAUSE = "program"  # the cause of the save events of the checkpoint watch: the program's own save
FAR_BEHIND = 0.5  # a first step below this share of the checkpoint's step is a start from (near) scratch


def step_at(events: Sequence[Mapping[str, Any]], run: int, at: float) -> float | None:
    """The program's step at time ``at`` of ``run``, from its progress samples (the program's own `step` where
    given, else `steps`): between two samples by their rate, after the last one at the last rate, but never past a
    start's last sample (`last`: the program's end or stop; a hung program made no step after it). A last sample
    from the node mark of a program killed while it made steps (`from_mark`, no hang in ``events``) is as old as
    the mark, written at most once every MARK_PERIOD seconds: the steps of at most that long at the last rate
    follow it. None when the run has none before ``at``."""
    samples: list[tuple[float, float, bool, bool]] = []
    hung = False
    for e in events:
        if e.get("run") != run:
            continue
        hung = hung or e.get("event") == run_history.HANG
        if e.get("event") not in (run_history.FIRST_STEP, run_history.PROGRESS):
            continue
        step = run_history.number(e.get("step", e.get("steps")))
        if step is not None:
            samples.append((float(e.get("time") or 0.0), step, e.get("last") is True, e.get("from_mark") is True))
    samples.sort()
    before = [s for s in samples if s[0] <= at]
    after = [s for s in samples if s[0] > at]
    if not before:
        return None
    t0, s0, last, marked = before[-1]
    if last and marked and not hung and len(before) > 1 and t0 > before[-2][0]:
        ta, sa = before[-2][:2]
        return s0 + (s0 - sa) / (t0 - ta) * min(at - t0, MARK_PERIOD)
    if last:
        return s0
    if after:
        t1, s1 = after[0][:2]
        return s0 + (s1 - s0) * (at - t0) / (t1 - t0)
    if len(before) > 1:
        ta, sa = before[-2][:2]
        return s0 + (s0 - sa) / (t0 - ta) * (at - t0) if t0 > ta else s0
    return s0


def silent_loss(events: Sequence[Mapping[str, Any]], run: int, since: float, resumed: bool) -> str | None:
    """The line for a start (of ``run``, begun at ``since``) whose first progress is far behind the last save the
    program made before it; None when it resumed, or nothing tells."""
    firsts = [e for e in events if e.get("run") == run and e.get("event") == run_history.FIRST_STEP
              and float(e.get("time") or 0.0) >= since]  # fmt: skip
    saves = [e for e in events if e.get("event") == run_history.SAVE and e.get("cause") == CAUSE
             and float(e.get("time") or 0.0) < since]  # fmt: skip
    if not firsts or not saves:
        return None
    first, save = firsts[0], saves[-1]
    started = first.get("step", first.get("steps"))
    saved = save.get("step")
    if not isinstance(saved, (int, float)):
        before = [e for e in events if float(e.get("time") or 0.0) < since]  # not this start's own samples
        saved = step_at(before, int(save.get("run") or 0), float(save.get("time") or 0.0))
    if not isinstance(started, (int, float)) or saved is None or saved < 2 or started >= FAR_BEHIND * saved:
        return None
    return (
        f"run {run} started at step {int(started)} although {save.get('path')} (saved {_clock(save)}, run "
        f"{save.get('run')}, step {int(saved)}) exists: {_fix(resumed)}"
    )


def _clock(event: Mapping[str, Any]) -> str:
    return time.strftime("%H:%M:%S", time.localtime(float(event.get("time") or 0.0)))


def _fix(resumed: bool) -> str:
    if resumed:
        return "the program was given resume.args and still did not resume: check that it reads them"
    return "the program does not resume by itself; give it resume.args (or resume.env)"


def older_save(events: Sequence[Mapping[str, Any]], run: int, since: float, at: float, resumed: bool) -> str | None:
    """The line for a start (of ``run``, begun at ``since``) whose save at ``at`` replaced the checkpoint with an
    older-looking one: its step (from this start's samples) far behind the step the checkpoint held; None when
    not, or nothing tells. It catches a start the first-progress check missed (no sample yet, or none before)."""
    saves = [e for e in events if e.get("event") == run_history.SAVE and e.get("cause") == CAUSE
             and float(e.get("time") or 0.0) < since]  # fmt: skip
    if not saves:
        return None
    save = saves[-1]
    before = [e for e in events if float(e.get("time") or 0.0) < since]
    held = step_at(before, int(save.get("run") or 0), float(save.get("time") or 0.0))
    now = step_at([e for e in events if float(e.get("time") or 0.0) >= since], run, at)
    if held is None or now is None or held < 2 or now >= FAR_BEHIND * held:
        return None
    return (
        f"run {run} replaced {save.get('path')} (saved {_clock(save)}, run {save.get('run')}, step {int(held)}) "
        f"with a save of step {int(now)}: it started over and lost that work; {_fix(resumed)}"
    )
