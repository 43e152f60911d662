"""A job's run history painted into a timeline: per run, segments that tile it from its start to its end, each
productive or one badput bucket, and the markers of what happened (saves, preemptions, crashes, hangs, excluded
nodes, requeues). Pure: events and the clock in, values out.

The buckets follow Google's ml-goodput-measurement (src/goodput.py), adapted to what the run history records:

- queue: between the end of one run and the start of the next (the requeue and Slurm's wait);
- startup: from a start of the program (the run's, or a restart's inside the allocation) to its first step;
- restore: the blocking load of the resume state (rank 0's `load` event), inside the start-up;
- save: the blocking part of each save (rank 0's `save` event: `seconds` before it was durable);
- redone: the work after the last save before an interruption, which the next start does again;
- recovery: from the failure (a task's exit, or the hang watchdog's verdict) to the next start of the step;
- hang: from the last progress of a hung step to the watchdog's verdict (recovery.hang_timeout); while a start of
  the program still runs, also the time since its last sampled step once no sample came long after one was due
  (`stalled_since`): the time a hang lasts is not productive before the watchdog calls it;
- other: after the program's last step to the run's end (the stop, the requeue, the shutdown).

Each start of the program is painted in that order of precedence (later paints win), so the segments of a run
tile it exactly and productive time plus the buckets is the wall time by construction.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmgen import run_history as rh

PRODUCTIVE = "productive"
QUEUE, STARTUP, SAVE, RESTORE, REDONE, RECOVERY, HANG, OTHER = (
    "queue", "startup", "save", "restore", "redone", "recovery", "hang", "other",
)  # fmt: skip
BUCKETS = (QUEUE, STARTUP, SAVE, RESTORE, REDONE, RECOVERY, HANG, OTHER)
# Not a bucket of BUCKETS: the time of a program whose steps were never recorded (goodput/summary.py, _unknown).
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Segment:
    run: int
    start: float
    end: float
    bucket: str  # PRODUCTIVE or one of BUCKETS

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Marker:
    run: int
    time: float
    kind: str  # save, preemption, crash, hang, excluded, requeue
    text: str  # the hover text: what happened, with its numbers
    node: str | None = None  # the node it happened on (a crash's, a hang's, an excluded node); None: the job's


@dataclass(frozen=True)
class RunView:
    run: int
    start: float
    end: float  # the clock's now while the run goes on
    running: bool
    ended: str | None  # run-end's `ended`: completed, requeued, failed, stopped, unsure
    cause: str | None  # why it stopped (run_history.Run.cause)
    nodes: str | None
    steps: int | None  # the steps rank 0 had made at its last sample
    step_seconds: float | None  # rank 0's recent mean step time at its last sample
    slurm: Mapping[str, float]  # Slurm's submit, eligible and start times of this run (epoch seconds), as recorded
    restarts: int = 0  # the step's restarts inside the allocation in this run (its restart events)

    @property
    def slurm_queue_seconds(self) -> float | None:
        """The wait Slurm reports for this run: StartTime - SubmitTime (scontrol show job)."""
        start, submit = self.slurm.get("start"), self.slurm.get("submit")
        return None if start is None or submit is None else max(start - submit, 0.0)


@dataclass(frozen=True)
class Timeline:
    runs: tuple[RunView, ...]
    segments: tuple[Segment, ...]
    markers: tuple[Marker, ...]
    redone_steps: int  # the steps the restarts lost (run_history.steps_lost), and the requeues (requeue_steps_lost)


Events = Sequence[Mapping[str, Any]]


def _t(event: Mapping[str, Any]) -> float:
    return float(event.get("time") or 0.0)


def _paint(segs: list[tuple[float, float, str]], a: float, b: float, bucket: str) -> None:
    """Paint [a, b) with ``bucket`` over the tiling ``segs`` (clipped to what the tiling covers)."""
    if not segs:
        return
    a, b = max(a, segs[0][0]), min(b, segs[-1][1])
    if b <= a:
        return
    out: list[tuple[float, float, str]] = []
    for s, e, k in segs:
        if e <= a or s >= b:
            out.append((s, e, k))
            continue
        if s < a:
            out.append((s, a, k))
        if e > b:
            out.append((b, e, k))
    out.append((a, b, bucket))
    out.sort()
    segs[:] = out


def _blocked(save: Mapping[str, Any]) -> tuple[float, float] | None:
    """When a save held the training loop: from its start (`seconds` before it was durable, the event's time) for
    its `blocking` seconds. A synchronous save blocks throughout; a background one only while it takes the state,
    then trains on while the files are written (runtime/checkpoint/commit.py: duration_s from the start, blocked_s
    of the caller)."""
    seconds = rh.number(save.get("seconds"))
    blocking = rh.number(save.get("blocking"))
    if seconds is None and blocking is None:
        return None
    start = _t(save) - (seconds if seconds is not None else blocking or 0.0)
    return start, start + (blocking if blocking is not None else seconds or 0.0)


def _resumed(save: Mapping[str, Any]) -> float:
    """The moment after which a save's state holds no work: training went on at the end of its blocking part (the
    state was taken then), even while a background save was still writing it."""
    window = _blocked(save)
    return _t(save) if window is None else window[1]


def _by_kind(events: Events) -> dict[str, list[Mapping[str, Any]]]:
    found: dict[str, list[Mapping[str, Any]]] = {}
    for e in events:
        found.setdefault(str(e.get("event")), []).append(e)
    return found


def _failures(kinds: Mapping[str, list[Mapping[str, Any]]]) -> list[float]:
    """When the start's tasks failed: each task's exit, and the moment its program raised an uncaught exception
    (`raised_at`, from its start-up hook), which can come seconds before the exits (atexit hooks, a tracker's
    finish(), its peers blocked in a collective until it is gone). Work stops at the raise: what follows is the
    failure's own time (recovery), not work done again. A raise is in its task's exit record, or in a `raised`
    record of its own, written while the program still lingered (its task can end first: torchrun's agent)."""
    found = []
    for e in kinds.get(rh.TASK_EXIT, []) + kinds.get(rh.RAISED, []):
        if e.get("event") == rh.TASK_EXIT:
            found.append(_t(e))
        raised = rh.number(e.get("raised_at"))
        if raised is not None:
            found.append(raised)
    return found


def _attempt(events: Events, a0: float, a1: float, restart: Mapping[str, Any] | None, tail: str | None,
             kinds: dict[str, list[Mapping[str, Any]]] | None = None, resumed: int | None = None,
             ) -> list[tuple[float, float, str]]:  # fmt: skip
    """One start of the program, [a0, a1): ended by ``restart`` (a restart event), or the run's last start with
    ``tail``: "finished", "stopped" (work after the last save kept or redone, as the saves say), "lost" (the
    run failed or ended unsaved and a later run redoes its work), or None (it still runs). ``resumed``: the step
    the start after it began at (after ``restart``: run_history.resumed_from; after a "lost" tail: the next run's
    first start, requeue_resumed), where its program says its step."""
    segs = [(a0, a1, STARTUP)]
    kinds = _by_kind(events) if kinds is None else kinds  # the run's, when this start is the run's only one
    firsts = kinds.get(rh.FIRST_STEP, [])
    first = min(_t(e) for e in firsts) if firsts else None
    if first is not None:
        _paint(segs, first, a1, PRODUCTIVE)
    saves = kinds.get(rh.SAVE, [])
    work_from = first if first is not None else a1
    # What the next start does not do again: what a save kept (the program's own Preemption.save, or the save at
    # the stop), a step of spec field `steps` that completed, and anything before the latest start of the
    # program's steps (its first-step): the redone stretch runs from the latest of these to the interruption.
    kept = [_resumed(e) for e in saves] + [_t(e) for e in kinds.get(rh.STEP_DONE, [])] + [_t(e) for e in firsts]
    # No save of this start was seen, yet the next one resumed past its first step: the program saved by itself
    # (its own checkpoint, unwatched) and resumed from that. Its work up to that step was kept, as far as it got.
    own_save = None
    if resumed is not None and not saves:
        own_save = time_at(kinds.get(rh.FIRST_STEP, []) + kinds.get(rh.PROGRESS, []), resumed)

    def redone_from(t: float) -> float:
        return last_save_before(t) if own_save is None else max(last_save_before(t), min(own_save, t))

    def last_save_before(t: float) -> float:
        return max([work_from, *(k for k in kept if k <= t)])

    def saved_after(t: float) -> bool:
        """A save at or after the interruption (the stop's own save): nothing of the work is lost."""
        return any(_t(e) >= t for e in saves)

    if restart is not None:
        hangs = kinds.get(rh.HANG, [])
        exits = _failures(kinds)
        if hangs:
            stalled = min(rh.number(e.get("progressed")) or _t(e) for e in hangs)
            judged = min(_t(e) for e in hangs)
            # The watchdog's `progressed` is as late as its poll that saw the last output; a last sample recorded
            # from the node mark when the program was killed holds its last step, and its time: the work done
            # again ends there, and the rest, to the verdict, made no step that was recorded.
            marked = [_t(e) for e in kinds.get(rh.PROGRESS, []) if e.get("last") and a0 <= _t(e) <= stalled]
            worked = min(marked) if marked else stalled
            _paint(segs, redone_from(worked), worked, REDONE)
            _paint(segs, worked, judged, HANG)
            _paint(segs, judged, a1, RECOVERY)
        else:
            failed = min(exits) if exits else a1
            if not saved_after(failed):
                _paint(segs, redone_from(failed), failed, REDONE)
            _paint(segs, failed, a1, RECOVERY)
    elif tail is None:  # it still runs: a hang the watchdog called, or no step long after one was due
        hangs = kinds.get(rh.HANG, [])
        samples = sorted(kinds.get(rh.FIRST_STEP, []) + kinds.get(rh.PROGRESS, []), key=_t)
        if hangs:
            stalled = min(rh.number(e.get("progressed")) or _t(e) for e in hangs)
            judged = min(_t(e) for e in hangs)
            _paint(segs, stalled, judged, HANG)
            _paint(segs, judged, a1, RECOVERY)
        elif (since := stalled_since(samples, a1)) is not None:
            _paint(segs, since, a1, HANG)
    elif tail == "finished":
        done = [_t(e) for e in kinds.get(rh.FINISHED, [])]
        if done:
            _paint(segs, min(done), a1, OTHER)
    elif tail in ("stopped", "lost"):
        until = _stopped_at(kinds, a1)
        if tail == "lost" and not saved_after(until):
            # A program that no save of slurmgen's stops (no Preemption) steps on after the stop's signal until the
            # step's SIGTERM ends it; its last sample says how far, and the next run does those steps again too.
            worked = until
            if kinds.get(rh.STOP):
                worked = max([until, *(_t(e) for e in kinds.get(rh.PROGRESS, []) if until < _t(e) <= a1)])
            _paint(segs, redone_from(until), worked, REDONE)
            until = worked
        _paint(segs, until, a1, OTHER if kinds.get(rh.STOP) or not _failures(kinds) else RECOVERY)
    for e in kinds.get(rh.LOAD, []):
        seconds = rh.number(e.get("seconds"))
        if seconds is not None:
            _paint(segs, _t(e) - seconds, _t(e), RESTORE)
    for e in saves:
        window = _blocked(e)
        if window is not None:
            _paint(segs, window[0], window[1], SAVE)
    return segs


def _stopped_at(kinds: Mapping[str, list[Mapping[str, Any]]], a1: float) -> float:
    """When a run's last start stopped working: its stop (the signal's handling), else its first failure, else
    the end of the start."""
    stops = [_t(e) for e in kinds.get(rh.STOP, [])]
    exits = _failures(kinds)
    return min(stops) if stops else (min(exits) if exits else a1)


def requeue_resumed(next_run: Events) -> int | None:
    """The program's own step the run after a requeue (or a resume) began at: its first start's first progress
    sample (run_history.began_at); None when it says no step, or that start made none before a restart."""
    firsts = sorted((e for e in next_run if e.get("event") in (rh.FIRST_STEP, rh.RESTART)), key=_t)
    return rh.began_at(firsts[0]) if firsts and firsts[0].get("event") == rh.FIRST_STEP else None


def requeue_steps_lost(last_start: Events, a1: float, resumed: int | None) -> int:
    """The steps the next run did again of a run's last start that ended unsaved (a requeue, a failed run then
    resumed): the program's step at its last sample less the step the next run began at (requeue_resumed), where
    the program says both; none when a save came at the stop (Preemption's), as the timeline paints it."""
    kinds = _by_kind(last_start)
    if resumed is None or any(_t(e) >= _stopped_at(kinds, a1) for e in kinds.get(rh.SAVE, [])):
        return 0
    samples = sorted(kinds.get(rh.FIRST_STEP, []) + kinds.get(rh.PROGRESS, []), key=_t)
    reached = rh.count(samples[-1].get("step")) if samples else None
    return max(reached - resumed, 0) if reached is not None else 0


def time_at(samples: Events, step: int) -> float | None:
    """When the program was at its own ``step`` (the samples' `step`), between two samples by their rate, or
    past the last by its step time; None when the samples say no step, or ``step`` is not past the first."""
    known = sorted((_t(e), n) for e in samples if (n := rh.number(e.get("step"))) is not None)
    if not known or step <= known[0][1]:
        return None
    for (t0, s0), (t1, s1) in itertools.pairwise(known):
        if s0 < step <= s1:
            return t0 + (t1 - t0) * (step - s0) / (s1 - s0)
    last = max(samples, key=_t)
    return known[-1][0] + (step - known[-1][1]) * (rh.number(last.get("step_seconds")) or 0.0)


STALL_GAPS = 3.0  # the allowance for the next sample, in gaps between the last two (rank 0 doubles its gap to 60 s)
STALL_FLOOR = 5.0  # s: never less (a busy node's scheduling, a slow first steps)


def stalled_since(samples: Events, now: float) -> float | None:
    """The time of the last sampled step when the program has stopped making steps, or None. Rank 0 samples at
    1, 2, 4, ... 32 s after its first step and every 60 s from then on (slurmgen/progress_sample.py), and only at a
    step; no sample within STALL_GAPS of its latest gaps (plus two step times) means no step is being made. A last
    sample (the program ended or stopped: `last`) is no stall."""
    if not samples or samples[-1].get("last"):
        return None
    latest = _t(samples[-1])
    gap = latest - _t(samples[-2]) if len(samples) > 1 else 1.0
    step = rh.number(samples[-1].get("step_seconds")) or 0.0
    allowance = max(STALL_GAPS * gap + 2.0 * step, STALL_FLOOR)
    return latest if now - latest > allowance else None


def _step_seconds(kinds: Mapping[str, list[Mapping[str, Any]]]) -> float | None:
    """A run's step time: rank 0's mean over its latest sampled stretch of steps. A start's last sample (`last`:
    its end, a stop, a kill) spans only the steps since the sample before it, and ends at what ended the start: a
    peer's death that the step waited on, the stop's agreement. Its time is the step time only when no other sample
    says one; a stop's `step_seconds` (Preemption's longest recent interval, for the lead time) comes after both."""
    progress = sorted(kinds.get(rh.PROGRESS, []), key=_t)
    for found in ([e for e in progress if not e.get("last")], progress, sorted(kinds.get(rh.STOP, []), key=_t)):
        timed = [v for v in (rh.number(e.get("step_seconds")) for e in found) if v is not None]
        if timed:
            return timed[-1]
    return None


def _node(event: Mapping[str, Any]) -> str | None:
    node = event.get("node")
    return node if isinstance(node, str) and node else None


def _markers(run: int, events: Events) -> list[Marker]:
    found: list[Marker] = []
    preempted = requeued = False
    last = None  # the time of the run's latest event before this one (build gives them in time order)
    for e in events:
        kind, t = e.get("event"), _t(e)
        if kind == rh.REQUEUE and e.get("cause") == rh.PREEMPTION and not preempted:
            # Slurm's requeue of a preempted run, recorded by the next run's batch shell (batch/commands.py,
            # _attribute): the run was preempted even if nothing of it lived to record the signal (a SIGKILL right
            # after SIGTERM under load). Its mark goes where the run's record ends.
            preempted = True
            found.append(Marker(run, t if last is None else last, "preemption", "preempted by Slurm"))
        if kind != rh.REQUEUE:
            last = t
        if kind == rh.SAVE:
            found.append(Marker(run, t, "save", f"save ({e.get('cause')}): {rh.number(e.get('seconds')) or 0:.1f} s"
                                + (f", step {e.get('steps')}" if e.get("steps") else "")))  # fmt: skip
        elif (
            kind in (rh.PREEMPTED, rh.STOP)
            and not preempted
            and (kind == rh.PREEMPTED or e.get("cause") == rh.PREEMPTION)
        ):
            preempted = True
            found.append(Marker(run, t, "preemption", "preempted by Slurm"))
        elif kind == rh.RESTART:
            what = "hang" if e.get("cause") == "hang" else "crash"
            found.append(Marker(run, t, what, f"{rh.restart_text(e, rh.steps_lost(events, e))}; restarted", _node(e)))
        elif kind == rh.NODE_EXCLUDED:
            found.append(Marker(run, t, "excluded", f"node excluded: {e.get('node')} ({e.get('reason')})", _node(e)))
        elif kind == rh.REQUEUE and not requeued:
            requeued = True
            found.append(Marker(run, t, "requeue", f"requeued ({e.get('cause')}) by {e.get('by')}"))
    return found


def build(events: Events, now: float, markers: bool = True) -> Timeline:
    """The timeline of a job from its run history (every writer's events, as run_history.read returns them);
    without `markers` (a sweep's roll-up of thousands of points) none is made."""
    by_run: dict[int, list[Mapping[str, Any]]] = {}
    for e in events:
        by_run.setdefault(int(e["run"]), []).append(e)
    numbers = sorted(by_run)
    summaries = {r.run: r for r in rh.runs(events)}
    runs: list[RunView] = []
    segments: list[Segment] = []
    found: list[Marker] = []
    redone_steps = 0
    previous_end: float | None = None
    for index, number in enumerate(numbers):
        mine = sorted(by_run[number], key=_t)
        summary = summaries[number]
        later = index + 1 < len(numbers)
        start = float(summary.start) if summary.start is not None else _t(mine[0])
        if previous_end is not None:
            start = max(start, previous_end)
        running = summary.end is None and not later
        end = max(start, now if running else float(summary.end) if summary.end is not None else _t(mine[-1]))
        if previous_end is not None and start > previous_end:
            segments.append(Segment(number, previous_end, start, QUEUE))
        kinds = _by_kind(mine)
        restarts = kinds.get(rh.RESTART, [])
        bounds = [start, *(min(max(_t(e), start), end) for e in restarts), end]
        finished = rh.FINISHED in kinds or summary.ended == "completed"
        tail = None if running else "finished" if finished else "lost" if later else "stopped"
        for k in range(len(bounds) - 1):
            a0, a1 = bounds[k], bounds[k + 1]
            last = k == len(bounds) - 2
            inside = mine if not restarts else [e for e in mine if a0 <= _t(e) < a1 or (last and _t(e) == a1)]
            restart = restarts[k] if k < len(restarts) else None
            whole = kinds if not restarts else None
            resumed = rh.resumed_from(mine, restart) if restart is not None else None
            if restart is None and tail == "lost":  # the next run redoes what this start did past its own save
                resumed = requeue_resumed(by_run[numbers[index + 1]])
                redone_steps += requeue_steps_lost(inside, a1, resumed)
            for s, e2, bucket in _attempt(inside, a0, a1, restart, None if restart else tail, whole, resumed):
                if e2 > s:
                    segments.append(Segment(number, s, e2, bucket))
        for r in restarts:
            redone_steps += rh.steps_lost(mine, r) or 0  # as `history` says it (run_history.steps_lost)
        if markers:
            found += _markers(number, mine)
        samples = sorted(kinds.get(rh.PROGRESS, []) + kinds.get(rh.FIRST_STEP, []), key=_t)
        if restarts:  # the run's steps are those of its last start: one that made no step made none
            samples = [e for e in samples if _t(e) >= _t(restarts[-1])]
        sample = samples[-1] if samples else {}
        step_seconds = _step_seconds(kinds)
        start_event = kinds[rh.RUN_START][0] if rh.RUN_START in kinds else {}
        queue = start_event.get("queue")
        read = {k: rh.number(v) for k, v in queue.items()} if isinstance(queue, Mapping) else {}
        slurm = {k: v for k, v in read.items() if v is not None}
        runs.append(RunView(
            number, start, end, running, summary.ended, summary.cause, summary.nodes,
            sample.get("steps") if isinstance(sample.get("steps"), int) else None,
            step_seconds, slurm, len(restarts),
        ))  # fmt: skip
        previous_end = end
    return Timeline(tuple(runs), tuple(segments), tuple(found), redone_steps)
