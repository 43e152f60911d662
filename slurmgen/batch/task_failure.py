"""The task that failed first, and the exit code the job should end with.

With `--kill-on-bad-exit` one failing task makes slurmstepd stop the others with SIGTERM, and the step (srun)
exits with the highest code of all: measured on Slurm 22.05, task 1 exiting 3 made the job ExitCode=143:0, from a
sibling's SIGTERM, while srun's own line said "task 1: Exited with exit code 3". Each task's supervisor records a
failure of its program's own (no stop signal came first) in the run history (run_history.TASK_EXIT); the batch
shell's `end` takes the earliest of this run as the job's exit code and names its rank, node and log. Pure, but for
reading the last lines of that log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from slurmgen import run_history

TAIL_LINES = 10
TAIL_BYTES = 16384  # read at most this much of the end of the log


@dataclass(frozen=True)
class TaskFailure:
    rank: int
    node: str
    exit_code: int
    signal: str | None  # the program died of this signal (exit_code is then 128 + its number)
    log: str | None
    time: float

    def describe(self) -> str:
        how = f"killed by SIG{self.signal}" if self.signal else f"exit {self.exit_code}"
        return f"rank {self.rank} on {self.node} ({how})"


def first_failure(events: Iterable[Mapping[str, Any]], run: int) -> TaskFailure | None:
    """The task of ``run`` that failed on its own, the earliest of them, not a casualty of it (a rank that lost its
    peers, exit 76, or died of the step's signal after another failed: interruption/casualty.py); None when no
    task-exit event."""
    found: list[TaskFailure] = []
    for e in events:
        if e.get("event") != run_history.TASK_EXIT or e.get("run") != run:
            continue
        try:
            found.append(
                TaskFailure(
                    rank=int(e["rank"]),
                    node=str(e.get("node") or "?"),
                    exit_code=int(e["exit_code"]),
                    signal=str(e["signal"]) if e.get("signal") else None,
                    log=str(e["log"]) if e.get("log") else None,
                    time=float(e.get("time") or 0.0),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    from slurmgen.interruption.casualty import TaskEnd, cause_of

    cause = cause_of([TaskEnd(f.rank, f.exit_code, f.signal, f.time) for f in found])
    return None if cause is None else next(f for f in found if (f.rank, f.time) == (cause.rank, cause.time))


def tail(path: str | None, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of a log, or [] when it cannot be read."""
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES and text:
        text = text[1:]  # the first line read is probably cut
    return text[-lines:]


def report(failure: TaskFailure, step_code: int, last: list[str]) -> list[str]:
    """What the batch log says about it."""
    how = f"was killed by SIG{failure.signal}" if failure.signal else f"exited with code {failure.exit_code}"
    lines = [f"rank {failure.rank} on {failure.node} failed first: its program {how}"]
    if step_code != failure.exit_code:
        lines[0] += f"; the job exits {failure.exit_code} (the step's {step_code} comes from the other tasks' stop)"
    if failure.log:
        lines.append(f"its log: {failure.log}" + ("; last lines:" if last else " (empty)"))
        lines += [f"| {line}" for line in last]
    return lines
