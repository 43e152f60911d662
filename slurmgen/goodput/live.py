"""The live lines of `slurmgen status JOB`: the step, the recent rate, the time since the last save, goodput so
far and the ETAs, from rank 0's sampled progress (slurmgen/progress_sample.py). A bar on a terminal, plain
`key: value` lines otherwise (for grep and logs). Pure: events, the clock and the width in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmgen import run_history as rh
from slurmgen.goodput.advice import duration_text
from slurmgen.goodput.summary import report
from slurmgen.goodput.timeline import HANG, RECOVERY, STARTUP


@dataclass(frozen=True)
class Live:
    run: int
    step: int | None  # the program's step (should_stop(step=...)) or its steps in this start of the program
    sampled_ago: float  # seconds since that sample
    steps_per_second: float | None  # over the last sampling interval
    since_save: float | None  # seconds since the newest durable save, of any run
    goodput: float
    total_steps: int | None
    eta_end: float | None  # seconds to total_steps at the recent rate
    eta_limit: float | None  # seconds to the run's time limit
    running: bool
    hung_for: float | None = None  # seconds since its last step, while a hang lasts (goodput.timeline's hang)
    called: bool = False  # the hang watchdog has called it: the step is ended and restarted


def live(events: Sequence[Mapping[str, Any]], now: float) -> Live | None:
    """The live view of a job, or None before its program's first step (nothing sampled: the table says all)."""
    if not any(e.get("event") in (rh.FIRST_STEP, rh.PROGRESS) for e in events):
        return None
    rep = report("", events, now)
    last_run = rep.timeline.runs[-1]
    mine = [e for e in events if e.get("run") == last_run.run]
    samples = [e for e in mine if e.get("event") in (rh.FIRST_STEP, rh.PROGRESS)]
    sample: Mapping[str, Any] = samples[-1] if samples else {}
    step = sample.get("step", sample.get("steps"))
    step = step if isinstance(step, int) else None
    timed = [e["step_seconds"] for e in samples if isinstance(e.get("step_seconds"), float | int)]
    seconds = float(timed[-1]) if timed else None
    # A run that ended (or whose program ended: the last sample says so) makes no steps: no rate, no ETA.
    going = last_run.running and not sample.get("last")
    # While a hang lasts (the run's time since its last step painted as hang, or the watchdog's recovery after it),
    # it makes no steps: no rate, no ETA, and goodput does not rise (goodput/timeline.py).
    tail = [s for s in rep.timeline.segments if s.run == last_run.run]
    hung = going and bool(tail) and tail[-1].bucket in (HANG, RECOVERY)
    hang_start = next((s.start for s in reversed(tail) if s.bucket == HANG), tail[-1].start) if hung else None
    # A start of the step after a restart makes no steps until its first: the rate of the start before is not its.
    going = going and not hung and not (bool(tail) and tail[-1].bucket == STARTUP)
    rate = 1.0 / seconds if seconds and going else None
    total = next((e.get("total_steps") for e in reversed(samples) if isinstance(e.get("total_steps"), int)), None)
    saves = [float(e["time"]) for e in events if e.get("event") == rh.SAVE]
    # Since the newest save: until now while the run goes on; until the run's end once it has ended.
    upto = now if last_run.running else min(float(last_run.end), now)
    eta_end = None
    if total is not None and step is not None and rate:
        eta_end = max(total - step, 0) / rate
    limit = last_run.slurm.get("limit")
    eta_limit = None if limit is None or not last_run.running else max(last_run.start + limit - now, 0.0)
    return Live(
        last_run.run, step, now - float(sample.get("time", now)), rate, upto - max(saves) if saves else None,
        rep.goodput, total, eta_end, eta_limit, last_run.running,
        None if hang_start is None else max(now - hang_start, 0.0), hung and tail[-1].bucket == RECOVERY,
    )  # fmt: skip


def bar(fraction: float, width: int) -> str:
    width = max(width, 10)
    filled = round(min(max(fraction, 0.0), 1.0) * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def lines(view: Live, terminal: bool, width: int = 80) -> list[str]:
    """`step: 420/1000`, `rate: 3.2 steps/s`, ... (plain); on a terminal, the step line carries a bar."""
    step = "?" if view.step is None else str(view.step)
    if view.total_steps is not None:
        step += f"/{view.total_steps}"
    if view.step is None:
        step += " (no step sampled yet)"
    elif view.running:
        step += f" (sampled {duration_text(view.sampled_ago)} ago)"
    else:
        step += " (the last)"
    out = [f"run: {view.run}{'' if view.running else ' (ended)'}", f"step: {step}"]
    if terminal and view.total_steps and view.step is not None:
        fraction = view.step / view.total_steps
        out.append(f"{bar(fraction, width - 8)} {fraction:4.0%}")
    if view.hung_for is not None:
        called = "the hang watchdog called it; the step restarts" if view.called else "a hang?"
        out.append(f"rate: none: hung, no step for {duration_text(view.hung_for)} ({called})")
        out.append("last save: " + ("none yet" if view.since_save is None else f"{duration_text(view.since_save)} ago"))
    elif view.running:
        out.append("rate: " + ("?" if view.steps_per_second is None else f"{view.steps_per_second:.3g} steps/s"))
        out.append("last save: " + ("none yet" if view.since_save is None else f"{duration_text(view.since_save)} ago"))
    else:
        saved = "none" if view.since_save is None else f"{duration_text(view.since_save)} before the run's end"
        out.append(f"last save: {saved}")
    out.append(f"goodput so far: {view.goodput:.1%}")
    if view.eta_end is not None:
        out.append(f"eta to total_steps: {duration_text(view.eta_end)}")
    if view.eta_limit is not None:
        out.append(f"time limit in: {duration_text(view.eta_limit)}")
    return out
