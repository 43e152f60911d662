"""Every task of some job arrays in one `squeue` call: the form `slurmgen status SWEEP` reads. Pure parsing.

`squeue --Format` (squeue(1)) prints each field as `type[:[.][size][suffix]]`; `State:|` has no size and `|` as its
suffix, so fields come out unpadded and separated by `|`, which no id, state, reason, count or time contains.
RestartCnt and exit_code are --Format fields only (there is no %-code for them). A pending range of an array
is one row (`123_[4-9%2]`); `--states=all` keeps the finished tasks Slurm still remembers (MinJobAge).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmgen.errors import SchedulerError
from slurmgen.slurm.ids import JobId, JobState, parse_job_id, parse_state, state_name
from slurmgen.slurm.parse import leading_int, optional, parse_duration

FIELDS = ("JobArrayID", "State", "Reason", "RestartCnt", "exit_code", "TimeUsed")
FORMAT = ",".join(f"{name}:|" for name in FIELDS)


@dataclass(frozen=True)
class TaskRow:
    job: JobId  # 123_4, or 123_[5-9%2] for a pending range
    state: JobState
    state_name: str
    reason: str | None
    restarts: int
    exit_code: int | None
    exit_signal: int | None
    elapsed: int | None  # seconds


def argv(jobs: list[str]) -> list[str]:
    return ["squeue", "--noheader", "--states=all", f"--jobs={','.join(jobs)}", f"--Format={FORMAT}"]


def parse(text: str) -> list[TaskRow]:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < len(FIELDS):
            raise SchedulerError(f"squeue: unexpected line {line[:200]!r} (was --Format={FORMAT!r} used?)")
        job, state, reason, restarts, code, used = parts[: len(FIELDS)]
        exit_code, _, signal = code.strip().partition(":")
        rows.append(
            TaskRow(
                job=parse_job_id(job.strip()),
                state=parse_state(state.strip()),
                state_name=state_name(state.strip()),
                reason=optional(reason.strip()),
                restarts=leading_int(restarts) or 0,
                exit_code=int(exit_code) if exit_code.isdigit() else None,
                exit_signal=int(signal) if signal.isdigit() and int(signal) else None,
                elapsed=parse_duration(used.strip()),
            )
        )
    return rows
