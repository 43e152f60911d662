"""The numbers of `slurmgen report`: goodput, the badput buckets and the advice, and their JSON (docs/goodput.md
documents the schema; `SCHEMA` is its version). Pure: a job's events and the clock in.

goodput = productive seconds / wall seconds, the wall from the first run's start to the last run's end (now, while
it runs); goodput_with_queue also counts the wait before the first start (Slurm's StartTime - SubmitTime).
productive_seconds + sum(buckets) == wall_seconds: the timeline's segments tile the wall.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmgen import run_history as rh
from slurmgen.goodput import timeline as tl
from slurmgen.goodput.advice import Advice, advise
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
    program: ProgramSaves | None = None  # the program's own saves (spec field checkpoint.path), where watched

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
        shown = {
            "schema": SCHEMA,
            "job": self.job,
            "running": self.running,
            "goodput": round(self.goodput, 6),
            "goodput_with_queue": round(self.goodput_with_queue, 6),
            "wall_seconds": round(self.wall_seconds, 3),
            "productive_seconds": round(self.productive_seconds, 3),
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
    for before, after in zip(line.runs, line.runs[1:], strict=False):
        if before.ended == "completed":
            continue
        recorded = rh.site_of(events, after.run).get("requeue_delay")
        if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and recorded > 0:
            total += min(float(recorded), max(after.start - before.end, 0.0))
    return total


def report(job: str, events: Sequence[Mapping[str, Any]], now: float, detail: bool = True) -> Report:
    """The report of one job (every run of it) from its run history; without `detail` (a point of a sweep's
    roll-up) it has neither markers nor advice, which cost a third of a point's report."""
    line = tl.build(events, now, markers=detail)
    buckets = dict.fromkeys(tl.BUCKETS, 0.0)
    productive = 0.0
    for s in line.segments:
        if s.bucket == tl.PRODUCTIVE:
            productive += s.seconds
        else:
            buckets[s.bucket] += s.seconds
    wall = (line.runs[-1].end - line.runs[0].start) if line.runs else 0.0
    first = line.runs[0].slurm_queue_seconds if line.runs else None
    advice = advice_of(events, line, buckets) if detail else None
    program = program_saves(events)
    return Report(job, wall, productive, buckets, first or 0.0, line.redone_steps, line, advice, program)


@dataclass(frozen=True)
class SweepReport:
    """A sweep's roll-up: every point's report, and the sums."""

    sweep: str
    points: Sequence[tuple[int, Report]]  # (point, its job's report)

    @property
    def wall_seconds(self) -> float:
        return sum(r.wall_seconds for _, r in self.points)

    @property
    def productive_seconds(self) -> float:
        return sum(r.productive_seconds for _, r in self.points)

    def buckets(self) -> dict[str, float]:
        total = dict.fromkeys(tl.BUCKETS, 0.0)
        for _, r in self.points:
            for k, v in r.buckets.items():
                total[k] += v
        return total

    def to_json(self) -> dict[str, Any]:
        with gc_paused():
            return self._json()

    def _json(self) -> dict[str, Any]:
        wall, productive = self.wall_seconds, self.productive_seconds
        queue = sum(r.queue_seconds for _, r in self.points)
        return {
            "schema": SCHEMA,
            "sweep": self.sweep,
            "goodput": round(productive / wall, 6) if wall > 0 else 0.0,
            "goodput_with_queue": round(productive / (wall + queue), 6) if wall + queue > 0 else 0.0,
            "wall_seconds": round(wall, 3),
            "productive_seconds": round(productive, 3),
            "buckets": {k: round(v, 3) for k, v in self.buckets().items()},
            "queue_seconds": round(queue, 3),
            "points": {str(p): {**r.to_json(detail=False), "advice": _advice(r)} for p, r in self.points},
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
