"""The numbers of `slurmgen report`: goodput, the badput buckets and the advice, and their JSON (docs/goodput.md
documents the schema; `SCHEMA` is its version). Pure: a job's events and the clock in.

goodput = productive seconds / wall seconds, the wall from the first run's start to the last run's end (now, while
it runs); goodput_with_queue also counts the wait before the first start (Slurm's StartTime - SubmitTime).
productive_seconds + sum(buckets) == wall_seconds: the timeline's segments tile the wall.

A program whose steps were never recorded (it neither uses `Preemption` nor has a `progress.pattern`, spec section
progress:) has a progress that is unknown: its time is neither productive nor start-up, and the report says so
(`progress_known: false`, goodput null) instead of painting the whole run as a start-up that never ended. What
stays known is Slurm's and the batch shell's: the queue between runs and the gap after a crash.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slurmgen import run_history as rh
from slurmgen.goodput import timeline as tl
from slurmgen.goodput.advice import Advice, advise
from slurmgen.goodput.advice_basis import too_thin
from slurmgen.goodput.program_saves import ProgramSaves, program_saves

SCHEMA = 1


@dataclass(frozen=True)
class Report:
    job: str
    wall_seconds: float
    productive_seconds: float
    buckets: Mapping[str, float]  # every name of timeline.BUCKETS, in that order
    queue_seconds: float  # before the first start; outside the wall (waits between runs are the queue bucket)
    redone_steps: int
    timeline: tl.Timeline
    advice: Advice | None  # None before a save was measured
    progress_known: bool = True  # False: no step of the program recorded (no Preemption, no progress.pattern)
    program: ProgramSaves | None = None  # the program's own saves (spec field checkpoint.path), where watched
    advice_note: str | None = None  # why no interval is advised, where the basis is too thin (advice is then None)

    @property
    def goodput(self) -> float:
        return self.productive_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def goodput_with_queue(self) -> float:
        total = self.wall_seconds + self.queue_seconds
        return self.productive_seconds / total if total > 0 else 0.0

    @property
    def running(self) -> bool:
        return any(r.running for r in self.timeline.runs)

    def to_json(self, detail: bool = True) -> dict[str, Any]:
        """The report as JSON; without ``detail`` (a sweep's points) no segments, markers or advice."""
        t = self.timeline
        known = self.progress_known
        shown = {
            "schema": SCHEMA,
            "job": self.job,
            "running": self.running,
            "progress_known": known,
            "goodput": round(self.goodput, 6) if known else None,
            "goodput_with_queue": round(self.goodput_with_queue, 6) if known else None,
            "wall_seconds": round(self.wall_seconds, 3),
            "productive_seconds": round(self.productive_seconds, 3) if known else None,
            "buckets": {k: round(v, 3) for k, v in self.buckets.items()},
            "queue_seconds": round(self.queue_seconds, 3),
            "redone_steps": self.redone_steps,
            # beside each other as status shows them: the requeues (runs after the first) and the restarts of the
            # step inside the allocation
            "requeues": max(len(t.runs) - 1, 0),
            "restarts": sum(r.restarts for r in t.runs),
            "runs": [
                {
                    "run": r.run,
                    "start": r.start,
                    "end": r.end,
                    "running": r.running,
                    "ended": r.ended,
                    "cause": r.cause,
                    "nodes": r.nodes,
                    "steps": r.steps,
                    "step_seconds": r.step_seconds,
                    "slurm_queue_seconds": r.slurm_queue_seconds,
                    "slurm": dict(r.slurm),
                    "restarts": r.restarts,
                }
                for r in t.runs
            ],
        }
        if self.program is not None:
            shown["program_checkpoint"] = self.program.to_json()
        if not detail:
            return shown
        shown["segments"] = [[s.run, round(s.start, 3), round(s.end, 3), s.bucket] for s in t.segments]
        shown["markers"] = [
            {"run": m.run, "time": m.time, "kind": m.kind, "text": m.text, "node": m.node} for m in t.markers
        ]
        shown["advice"] = None if self.advice is None else dict(self.advice.__dict__)
        shown["advice_note"] = self.advice_note
        return shown


def _interval(events: Sequence[Mapping[str, Any]]) -> float | None:
    """The mean time between consecutive periodic saves of one start of the program."""
    gaps: list[float] = []
    last: tuple[int, float] | None = None
    for e in events:
        kind, t = e.get("event"), float(e.get("time") or 0.0)
        if kind in (rh.RUN_START, rh.RESTART, rh.FIRST_STEP):
            last = None
        elif kind == rh.SAVE and e.get("cause") == "periodic":
            if last is not None and last[0] == e["run"]:
                gaps.append(t - last[1])
            last = (int(e["run"]), t)
    return sum(gaps) / len(gaps) if gaps else None


def interruption_rate(events: Sequence[Mapping[str, Any]], line: tl.Timeline) -> tuple[int, float]:
    """(interruptions, seconds of runs): the step's restarts and the runs that did not complete but had a next."""
    restarts = rh.History(events).step_restarts()
    requeues = sum(1 for r in line.runs[:-1] if r.ended != "completed")
    return restarts + requeues, sum(r.end - r.start for r in line.runs)


def rate_of(events: Sequence[Mapping[str, Any]], now: float) -> tuple[int, float]:
    """interruption_rate of another job's run history (a peer of the pooled advice)."""
    return interruption_rate(events, tl.build(events, now, markers=False))


def partition_of(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The partition the job's last run started in (its run-start event), None when not recorded."""
    found = [e.get("partition") for e in events if e.get("event") == rh.RUN_START]
    return next((p for p in reversed(found) if isinstance(p, str) and p), None)


def advice_of(events: Sequence[Mapping[str, Any]], line: tl.Timeline, buckets: Mapping[str, float]) -> Advice | None:
    saves = [float(e.get("blocking", e["seconds"])) for e in events
             if e.get("event") == rh.SAVE and isinstance(e.get("seconds"), (int, float))]  # fmt: skip
    if not saves:
        return None
    interruptions, observed = interruption_rate(events, line)
    delays = requeue_delays(events, line)
    coming_back = sum(buckets[k] for k in (tl.STARTUP, tl.RESTORE, tl.RECOVERY, tl.HANG)) + delays
    queues = [e["queue"] for e in events if e.get("event") == rh.RUN_START and isinstance(e.get("queue"), Mapping)]
    limits = [q.get("limit") for q in queues]
    limit = next((float(v) for v in reversed(limits) if isinstance(v, (int, float))), None)
    step = next((r.step_seconds for r in reversed(line.runs) if r.step_seconds is not None), None)
    return advise(sum(saves) / len(saves), interruptions, observed, coming_back / (interruptions + 1),
                  _interval(events), limit, step, requeue_delay_seconds=delays)  # fmt: skip


def requeue_delays(events: Sequence[Mapping[str, Any]], line: tl.Timeline) -> float:
    """The seconds Slurm held the job after each requeue of it (the site's requeue delay, recorded at the start
    of the run that waited: slurm/site_config.py), each at most the wait between the two runs. They are queue
    time in the timeline; the advice counts them in what an interruption costs."""
    total = 0.0
    sites = rh.sites(events)
    for before, after in zip(line.runs, line.runs[1:], strict=False):
        if before.ended == "completed":
            continue
        recorded = rh.number(sites.get(after.run, {}).get("requeue_delay"))
        if recorded is not None and recorded > 0:
            total += min(recorded, max(after.start - before.end, 0.0))
    return total


# What only the program's own record of its steps gives: without one, these events are absent from every run.
_STEPPED = frozenset({rh.HANDLER, rh.FIRST_STEP, rh.PROGRESS})
# The buckets that are facts without the program's steps: Slurm's queue and the batch shell's view of a crash.
KNOWN_WITHOUT_STEPS = (tl.QUEUE, tl.RECOVERY)


def progress_known(events: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the program's steps were recorded: it constructed Preemption, or its output gave a step."""
    return any(e.get("event") in _STEPPED for e in events)


def report(job: str, events: Sequence[Mapping[str, Any]], now: float, detail: bool = True) -> Report:
    """The report of one job (every run of it) from its run history; without `detail` (a point of a sweep's
    roll-up) it has neither markers nor advice, which cost a third of a point's report."""
    line = tl.build(events, now, markers=detail)
    if not progress_known(events):
        return _unknown(job, line, program_saves(events))
    buckets = dict.fromkeys(tl.BUCKETS, 0.0)
    productive = 0.0
    for s in line.segments:
        if s.bucket == tl.PRODUCTIVE:
            productive += s.seconds
        else:
            buckets[s.bucket] += s.seconds
    wall = (line.runs[-1].end - line.runs[0].start) if line.runs else 0.0
    first = line.runs[0].slurm_queue_seconds if line.runs else None
    note = too_thin(events, interruption_rate(events, line)[0]) if detail else None
    advice = advice_of(events, line, buckets) if detail and note is None else None
    program = program_saves(events)
    return Report(job, wall, productive, buckets, first or 0.0, redone_of(line, program), line, advice,
                  program=program, advice_note=note)  # fmt: skip


def redone_of(line: tl.Timeline, program: ProgramSaves | None) -> int:
    """The steps done again: where the job watches the program's own checkpoint (checkpoint.path), those of each
    stop back to the program's last save, restarts and requeues alike; otherwise those the restarts recorded
    (a stop of Preemption's saves first, so its requeue redoes none)."""
    counted = [] if program is None else [s.lost_steps for s in program.stops if s.lost_steps is not None]
    return sum(counted) if counted else line.redone_steps


def _unknown(job: str, line: tl.Timeline, program: ProgramSaves | None = None) -> Report:
    """The report of a job whose program's steps were never recorded: every second that is not a known bucket
    is `unknown`, none of it productive nor start-up."""
    import dataclasses

    segments = tuple(s if s.bucket in KNOWN_WITHOUT_STEPS else dataclasses.replace(s, bucket=tl.UNKNOWN)
                     for s in line.segments)  # fmt: skip
    buckets = dict.fromkeys((*KNOWN_WITHOUT_STEPS, tl.UNKNOWN), 0.0)
    for s in segments:
        buckets[s.bucket] += s.seconds
    wall = (line.runs[-1].end - line.runs[0].start) if line.runs else 0.0
    first = line.runs[0].slurm_queue_seconds if line.runs else None
    shown = dataclasses.replace(line, segments=segments)
    return Report(job, wall, 0.0, buckets, first or 0.0, line.redone_steps, shown, None, progress_known=False,
                  program=program)  # fmt: skip


def unknown_line(r: Report) -> str:
    """The one line that says a job's progress is unknown, and how to make it known."""
    yet = " yet" if r.running else ""
    return (f"the program's progress is unknown: no step of it was recorded{yet} (it does not use Preemption, and "
            "the spec has no progress.pattern to read its step from its output); no goodput and no start-up, "
            "save or redone time can be told")  # fmt: skip


def outcome(r: Report) -> str:
    """How a job's last run stands: `running`, or its run-end's `ended` (completed, requeued, failed, stopped,
    unsure); `unknown` when no run-end was recorded."""
    if r.running:
        return "running"
    last = r.timeline.runs[-1].ended if r.timeline.runs else None
    return last or "unknown"


@dataclass(frozen=True)
class PointCounts:
    point: int
    outcome: str
    runs: int
    requeues: int  # its runs after the first
    restarts: int  # the step's restarts inside the allocation, over its runs


@dataclass(frozen=True)
class SweepReport:
    """A sweep's roll-up: every point's report, the point's values (its swept parameters), and the sums. The sums
    are over the points: the wall is the sum of the points' walls (the allocation time the sweep used), so
    productive plus every bucket equals it as for one job, and the goodput is the sums' ratio."""

    sweep: str
    points: Sequence[tuple[int, Report]]  # (point, its job's report)
    values: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)  # point -> its parameters' values
    shown: Mapping[int, str] = field(default_factory=dict)  # point -> its values as status shows them

    @property
    def wall_seconds(self) -> float:
        return sum(r.wall_seconds for _, r in self.points)

    @property
    def productive_seconds(self) -> float:
        return sum(r.productive_seconds for _, r in self.points)

    @property
    def queue_seconds(self) -> float:
        return sum(r.queue_seconds for _, r in self.points)

    @property
    def progress_known(self) -> bool:
        """Whether any point's steps were recorded: with none, the sweep's goodput is unknown, as a job's is."""
        return any(r.progress_known for _, r in self.points)

    @property
    def goodput(self) -> float:
        wall = self.wall_seconds
        return self.productive_seconds / wall if wall > 0 else 0.0

    @property
    def goodput_with_queue(self) -> float:
        total = self.wall_seconds + self.queue_seconds
        return self.productive_seconds / total if total > 0 else 0.0

    def buckets(self) -> dict[str, float]:
        # with no point's progress known, only the buckets a job of unknown progress has (_unknown): none pretends
        total = dict.fromkeys(tl.BUCKETS if self.progress_known else (*KNOWN_WITHOUT_STEPS, tl.UNKNOWN), 0.0)
        for _, r in self.points:
            for k, v in r.buckets.items():
                total[k] = total.get(k, 0.0) + v  # a point of unknown progress adds its `unknown` time
        return total

    @functools.cached_property
    def each(self) -> tuple[PointCounts, ...]:
        """Per point, in order: its outcome, runs, requeues and restarts, counted once for the table and the sums."""
        out = []
        for p, r in self.points:
            runs = len(r.timeline.runs)
            out.append(PointCounts(p, outcome(r), runs, max(runs - 1, 0), sum(x.restarts for x in r.timeline.runs)))
        return tuple(out)

    def counts(self) -> dict[str, int]:
        """The sums of the points' runs, requeues, restarts and redone steps."""
        return {
            "runs": sum(c.runs for c in self.each),
            "requeues": sum(c.requeues for c in self.each),
            "restarts": sum(c.restarts for c in self.each),
            "redone_steps": sum(r.redone_steps for _, r in self.points),
        }

    def outcomes(self) -> dict[str, int]:
        """How many points stand how (outcome), most first."""
        found: dict[str, int] = {}
        for c in self.each:
            found[c.outcome] = found.get(c.outcome, 0) + 1
        return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_json(self) -> dict[str, Any]:
        with gc_paused():
            return self._json()

    def _json(self) -> dict[str, Any]:
        counts = self.counts()
        known = self.progress_known
        return {
            "schema": SCHEMA,
            "sweep": self.sweep,
            "running": any(r.running for _, r in self.points),
            "progress_known": known,
            "goodput": round(self.goodput, 6) if known else None,
            "goodput_with_queue": round(self.goodput_with_queue, 6) if known else None,
            "wall_seconds": round(self.wall_seconds, 3),
            "productive_seconds": round(self.productive_seconds, 3) if known else None,
            "buckets": {k: round(v, 3) for k, v in self.buckets().items()},
            "queue_seconds": round(self.queue_seconds, 3),
            "run_count": counts["runs"],
            "requeues": counts["requeues"],
            "restarts": counts["restarts"],
            "redone_steps": counts["redone_steps"],
            "outcomes": self.outcomes(),
            "points": {
                str(p): {
                    "values": dict(self.values.get(p, {})),
                    "outcome": c.outcome,
                    **r.to_json(detail=False),
                    "advice": _advice(r),
                }
                for (p, r), c in zip(self.points, self.each, strict=True)
            },
        }


def _advice(r: Report) -> dict[str, Any] | None:
    return None if r.advice is None else dict(r.advice.__dict__)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a sweep's reports are made: they are many small acyclic objects
    (events, segments, dicts), and each collection walks every object alive, so a 10,000-point roll-up paid for its
    growing heap again and again (bench/report.py: about a third of its time). Reference counting still frees them;
    the collector runs again afterwards as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
