"""The program's own saves in `slurmgen report` (spec field checkpoint.path; task/checkpoint_watch.py records them):
how many, what they cost and how that was told, and per stop (a restart inside the allocation, a run that did not
complete) the work lost back to the program's last save before it, not back to the run's start. Pure: a job's
events in, numbers and lines out.

Lost work of a stop: from the program's last save before it (in any earlier start: that is what the next start
resumes from) to the stop (the first task's exit of a crash, the stop of a preemption, else the run's end), in
seconds and, where the progress samples tell the step at both ends, in steps. The steps count back to the step the
next start began at where the program prints its own and it resumed (what it really resumed from), else to the step
at its save.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmgen import run_history as rh
from slurmgen.checkpoint_steps import CAUSE, FAR_BEHIND, step_at

Events = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Stop:
    run: int
    kind: str  # restart (inside the allocation) or requeue (the run ended before its work was done)
    time: float
    saved_at: float | None  # the program's last save before the stop; None: it had not saved
    lost_seconds: float | None
    lost_steps: int | None


@dataclass(frozen=True)
class ProgramSaves:
    saves: int
    timed: int  # the saves whose cost was seen
    mean_seconds: float | None
    bases: Mapping[str, int]  # rename, write, unseen: how many saves were timed each way
    stops: tuple[Stop, ...]
    ignored: tuple[str, ...]  # the checkpoint-ignored lines: starts that lost work in silence

    def to_json(self) -> dict[str, Any]:
        return {
            "saves": self.saves,
            "timed": self.timed,
            "mean_seconds": None if self.mean_seconds is None else round(self.mean_seconds, 3),
            "bases": dict(self.bases),
            "stops": [s.__dict__ for s in self.stops],
            "ignored": list(self.ignored),
        }

    def lines(self) -> list[str]:
        cost = ", their cost not seen (each was over within a poll)"
        if self.mean_seconds is not None:
            how = ", ".join(f"{n} by {b}" for b, n in self.bases.items() if b != "unseen")
            cost = f", {self.mean_seconds:.1f} s each on average ({self.timed} timed: {how})"
        out = [f"program saves: {self.saves}{cost}"]
        for s in self.stops:
            back = "no save before it" if s.saved_at is None else "back to the program's last save"
            steps = "" if s.lost_steps is None else f", {s.lost_steps} steps"
            seconds = "?" if s.lost_seconds is None else f"{s.lost_seconds:.1f}"
            out.append(f"run {s.run} {s.kind}: {seconds} s lost{steps} ({back})")
        out += [f"! {line}" for line in self.ignored]
        return out


def _t(e: Mapping[str, Any]) -> float:
    return float(e.get("time") or 0.0)


def _starts(events: Events) -> list[float]:
    return sorted(_t(e) for e in events if e.get("event") in (rh.RUN_START, rh.RESTART))


def _stops(events: Events) -> list[tuple[int, str, float]]:
    """(run, kind, time) of each stop of the program before its work was done."""
    found: list[tuple[int, str, float]] = []
    runs = sorted({int(e["run"]) for e in events})
    for e in events:
        if e.get("event") == rh.RESTART:
            run, at = int(e["run"]), _t(e)
            starts = [t for t in _starts(events) if t < at]
            since = starts[-1] if starts else 0.0
            exits = [_t(x) for x in events if x.get("event") == rh.TASK_EXIT and since <= _t(x) <= at]
            found.append((run, "restart", min(exits) if exits else at))
    for e in events:
        if e.get("event") == rh.RUN_END and e.get("ended") != "completed" and int(e["run"]) < runs[-1]:
            run = int(e["run"])
            last = max([t for t in _starts(events) if t <= _t(e)], default=0.0)
            stops = [_t(x) for x in events if x.get("run") == run and x.get("event") == rh.STOP and _t(x) >= last]
            # The stop is recorded when it is decided; the program works on until the signal reaches it (and may
            # save meanwhile): it stopped at its last sign of life, a progress sample or a save.
            alive = [_t(x) for x in events if x.get("run") == run and last <= _t(x) <= _t(e) and (
                x.get("event") in (rh.FIRST_STEP, rh.PROGRESS)
                or (x.get("event") == rh.SAVE and x.get("cause") == CAUSE))]  # fmt: skip
            found.append((run, "requeue", max([min(stops) if stops else _t(e), *alive])))
    return sorted(found, key=lambda s: s[2])


def _step(events: Events, run: int, at: float) -> float | None:
    """The step at ``at`` from the samples of the start it falls in (a restart's start begins a new count)."""
    starts = _starts(events)
    since = max([t for t in starts if t <= at], default=0.0)
    until = min([t for t in starts if t > at], default=float("inf"))
    return step_at([e for e in events if since <= _t(e) < until], run, at)


def _reached(events: Events, run: int, at: float) -> float | None:
    """The step a start reached by its stop at ``at``: the step then, or a later sample of the same start where
    the program ran on after it (a preemption's stop is recorded before the signal reaches the program)."""
    starts = _starts(events)
    since = max([t for t in starts if t <= at], default=0.0)
    until = min([t for t in starts if t > at], default=float("inf"))
    later = [float(e.get("step", e.get("steps")) or 0) for e in events
             if e.get("run") == run and e.get("event") in (rh.FIRST_STEP, rh.PROGRESS) and at < _t(e) < until
             and isinstance(e.get("step", e.get("steps")), (int, float))]  # fmt: skip
    now = _step(events, run, at) if since <= at else None
    return max([v for v in (now, *later) if v is not None], default=None)


def _resumed_at(events: Events, at: float) -> float | None:
    """The step the next start after a stop at ``at`` began at, where the program says its own step: where it
    resumed from, which may lie before the step its last save was made at (pytorch/examples' multinode.py saves
    epoch K's end as EPOCHS_RUN=K and does epoch K again); None when unknown.

    The start's first sample says it two ways. A program's printed line (spec section progress:) is the step it is
    at, and its sample holds that step as `steps` too. `Preemption.should_stop(step=)` is called after a step: its
    sample holds the program's step and, as `steps`, the steps this start has made (one, at the first sample), so
    the start began that many steps before (Lightning resumed from the save at 20 says 21 at its first step)."""
    starts = [t for t in _starts(events) if t > at]
    if not starts:
        return None
    since = starts[0]
    until = min([t for t in starts if t > since], default=float("inf"))
    for e in events:
        step, made = e.get("step"), e.get("steps")
        if (e.get("event") == rh.FIRST_STEP and since <= _t(e) < until and isinstance(step, (int, float))
                and not isinstance(step, bool)):  # fmt: skip
            if isinstance(made, int) and not isinstance(made, bool) and 0 < made < step:
                return float(step - made)
            return float(step)
    return None


def program_saves(events: Events) -> ProgramSaves | None:
    """The program's saves and what each stop lost; None when the job watched no checkpoint."""
    saves = sorted((e for e in events if e.get("event") == rh.SAVE and e.get("cause") == CAUSE), key=_t)
    ignored = tuple(str(e.get("line")) for e in events if e.get("event") == rh.CHECKPOINT_IGNORED)
    if not saves and not ignored:
        return None
    timed = [float(e["seconds"]) for e in saves if isinstance(e.get("seconds"), (int, float))]
    bases: dict[str, int] = {}
    for e in saves:
        bases[str(e.get("basis") or "unseen")] = bases.get(str(e.get("basis") or "unseen"), 0) + 1
    stops = []
    for run, kind, at in _stops(events):
        before = [e for e in saves if _t(e) <= at]
        saved = _t(before[-1]) if before else None
        lost_steps = None
        if before:
            kept = _step(events, int(before[-1]["run"]), saved or 0.0)
            resumed = _resumed_at(events, at)
            if resumed is not None and kept is not None and resumed >= FAR_BEHIND * kept:
                kept = resumed  # it resumed from that save (one that started over lost more: `ignored` says so)
            reached = _reached(events, run, at)
            if reached is not None and kept is not None:
                lost_steps = max(round(reached - kept), 0)
        lost = round(at - saved, 3) if saved is not None else None
        stops.append(Stop(run, kind, round(at, 3), saved, lost, lost_steps))
    mean = sum(timed) / len(timed) if timed else None
    return ProgramSaves(len(saves), len(timed), mean, bases, tuple(stops), ignored)
