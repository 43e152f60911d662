"""The rank that failed, not its casualties: which of a start's failed tasks caused the failure, and what of its
error line identifies the error (the repeated-failure rule compares that, allocation.decide_restart).

When one rank fails, the others die of it: their peers' connections close and they exit with slurmgen's peer-loss
code (exit_codes.EXIT_PEER_LOST), or srun's --kill-on-bad-exit ends the step and they die of its signal (TERM,
then KILL after KillWait: srun(1)). With `srun: {kill-on-bad-exit: false}` srun sends nothing: the others run on,
and srun waits for all of them; a SIGTERM or SIGKILL that one of them gets later is its own end (the OOM killer,
a scancel of the step), not the failure's, and only a lost peer is a casualty. At 16,384 ranks, 16,383 casualties
stand around one cause, and the first exit recorded is often a casualty's: a peer sees the closed connection before
the failing rank has finished exiting.

Standard library and the run history's vocabulary only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmgen import exit_codes, run_history

STEP_SIGNALS = frozenset({"TERM", "KILL"})  # what srun and slurmstepd send the tasks of a step they end


@dataclass(frozen=True)
class TaskEnd:
    """One failed task of a start of the step, as its supervisor recorded it."""

    rank: int
    exit_code: int
    signal: str | None  # the program died of this signal ("KILL"), None when it exited
    time: float  # epoch seconds of the record
    raised_at: float | None = None  # the program's uncaught exception, when its start-up hook recorded it


def is_casualty(end: TaskEnd, ends: Sequence[TaskEnd], step_kills: bool = True) -> bool:
    """A task that died of another's failure: it lost its peers (exit 76), or, while srun ends the step when a task
    fails (``step_kills``: --kill-on-bad-exit=1), it died of the step's signal after another task had failed. A task
    that raised an exception of its own (task/program_error.py) is no casualty, even when its peers exited first: it
    failed when it raised."""
    if end.exit_code == exit_codes.EXIT_PEER_LOST:
        return True
    if end.raised_at is not None:
        return False
    by_step = end.signal in STEP_SIGNALS or end.exit_code in (128 + 15, 128 + 9)
    return step_kills and by_step and any(other.time < end.time and other.rank != end.rank for other in ends)


def cause_of(ends: Sequence[TaskEnd], step_kills: bool = True) -> TaskEnd | None:
    """The task that failed on its own, the earliest of them; only casualties: the earliest casualty. Among failures
    of their own, the order is that of their records, not of when they raised: a rank that raised because a peer was
    killed (gloo's "remote worker crashing") raises before the killed rank's end is recorded (under torchrun its
    agent records it late), and is no more the cause than before."""
    if not ends:
        return None
    own = [end for end in ends if not is_casualty(end, ends, step_kills)]
    if len(own) > 1 and all(end.raised_at is not None for end in own):
        # Every one of them raised: the earliest raise is the cause. A peer that calls the collective itself
        # (dist.all_reduce, not through Preemption) raises gloo's "Connection reset by peer" and exits 1, not 76,
        # only once the failing rank raised and closed its connections; it is recorded first when that rank
        # lingers in its atexit hooks (a tracker's finish), so the records' order would blame the casualty.
        return min(own, key=lambda end: (end.raised_at or 0.0, end.rank))
    return min(own or ends, key=lambda end: (end.time, end.rank))


@dataclass(frozen=True)
class TaskFailure:
    rank: int
    node: str
    exit_code: int
    signal: str | None  # the program died of this signal (exit_code is then 128 + its number)
    log: str | None
    time: float
    raised: str | None = None  # the uncaught exception its program raised ("ValueError: bad batch"), if recorded
    raised_at: float | None = None

    def describe(self) -> str:
        how = f"killed by SIG{self.signal}" if self.signal else f"exit {self.exit_code}"
        return f"rank {self.rank} on {self.node} ({how})"


def first_failure(events: Iterable[Mapping[str, Any]], run: int, step_kills: bool = True) -> TaskFailure | None:
    """The task of ``run`` that failed on its own, the earliest of them, not a casualty of it (a rank that lost its
    peers, exit 76, or died of the step's signal after another failed while ``step_kills``: `is_casualty`); None
    when no task-exit event."""
    found: list[TaskFailure] = []
    for e in exit_records(events, run):
        try:
            found.append(
                TaskFailure(
                    rank=int(e["rank"]),
                    node=str(e.get("node") or "?"),
                    exit_code=int(e["exit_code"]),
                    signal=str(e["signal"]) if e.get("signal") else None,
                    log=str(e["log"]) if e.get("log") else None,
                    time=float(e.get("time") or 0.0),
                    raised=str(e["raised"]) if e.get("raised") else None,
                    raised_at=run_history.number(e.get("raised_at")),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    cause = cause_of([TaskEnd(f.rank, f.exit_code, f.signal, f.time, f.raised_at) for f in found], step_kills)
    return None if cause is None else next(f for f in found if (f.rank, f.time) == (cause.rank, cause.time))


def exit_records(events: Iterable[Mapping[str, Any]], run: int) -> list[Mapping[str, Any]]:
    """The task-exit records of ``run``, with what the `raised` records add: a task-exit without the exception its
    program raised gets it, and a rank that raised and has no task-exit record gets one, exit code 1 (CPython's
    after an uncaught exception) at the time of its raise record. Its task can end before its program does: under
    torchrun the task is the agent, and a worker lingering in its atexit hooks outlasted it, so the batch shell
    decided without the raising rank's exit, and named a casualty."""
    exits = [e for e in events if e.get("event") == run_history.TASK_EXIT and e.get("run") == run]
    raises: dict[Any, Mapping[str, Any]] = {}
    for e in events:
        if e.get("event") == run_history.RAISED and e.get("run") == run and "rank" in e:
            raises.setdefault(e["rank"], e)
    out: list[Mapping[str, Any]] = []
    for e in exits:
        raised = raises.pop(e.get("rank"), None)
        if raised is not None and e.get("raised_at") is None:
            e = {**e, "raised": raised.get("raised"), "raised_at": raised.get("raised_at")}
        out.append(e)
    for raised in raises.values():
        out.append({**raised, "event": run_history.TASK_EXIT, "exit_code": 1})
    return out


# What changes from one attempt to the next in the same error: an address (IPv4, with its port), a pointer or
# other hexadecimal value, and any number of four or more digits (a port, a pid, a byte count, a time).
CHANGING = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\b0x[0-9a-fA-F]+\b|\b\d{4,}\b")


def error_key(line: str) -> str:
    """What identifies an error line: the line without the numbers that change with every attempt."""
    return CHANGING.sub("#", line)


def stop_of_a_casualty(
    stop_time: float | None, ends: Sequence[TaskEnd], signals: Sequence[str], step_kills: bool = True
) -> bool:
    """Whether rank 0's recorded stop is a casualty's, not a stop under way: no signal reached the batch shell (no
    preemption, time limit or scancel), and a task had failed on its own before it. srun's --kill-on-bad-exit
    sends the rest of the step SIGTERM, which Preemption takes for a stop like any other (srun(1)). Without it
    (``step_kills`` false) srun sends nothing when a task fails: a stop rank 0 records is one of its own (a signal
    sent to the step alone, `scancel --signal` without --batch), and it stays a stop."""
    cause = cause_of(ends, step_kills)
    if not step_kills or stop_time is None or cause is None or signals or is_casualty(cause, ends, step_kills):
        return False
    return stop_time >= cause.time
