"""Every task of some job arrays in one `squeue` call: the form `slurmgen status SWEEP` reads. Pure parsing.

`squeue --Format` (squeue(1)) prints each field as `type[:[.][size][suffix]]`; `State:|` has no size and `|` as its
suffix, so fields come out unpadded and separated by `|`, which no id, state, reason, count or time contains.
RestartCnt and exit_code are --Format fields only (there is no %-code for them). squeue's exit_code is the job's
raw wait status, printed as one integer (src/squeue/print.c, `_print_job_exit_code`: `_print_int(job->exit_code)`):
exit code 3 is 768, SIGKILL is 9; sacct and `scontrol show job` print the same status as `3:0` and `0:9`. A
pending range of an array is one row (`123_[4-9%2]`); `--states=all` keeps the finished tasks Slurm still remembers
(MinJobAge).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmgen.errors import SchedulerError
from slurmgen.slurm.ids import (
    JobId,
    JobState,
    leading_int,
    optional,
    parse_duration,
    parse_job_id,
    parse_state,
    state_name,
)

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
        exit_code, signal = exit_parts(code.strip())
        rows.append(
            TaskRow(
                job=parse_job_id(job.strip()),
                state=parse_state(state.strip()),
                state_name=state_name(state.strip()),
                reason=optional(reason.strip()),
                restarts=leading_int(restarts) or 0,
                exit_code=exit_code,
                exit_signal=signal,
                elapsed=parse_duration(used.strip()),
            )
        )
    return rows


def exit_parts(code: str) -> tuple[int | None, int | None]:
    """(exit code, signal or None) of squeue's exit_code: a raw wait status (768: exit 3; 9: SIGKILL), or the
    `code:signal` pair that sacct prints, should a version print that."""
    if ":" in code:
        exit_code, _, signal = code.partition(":")
        return (
            int(exit_code) if exit_code.isdigit() else None,
            int(signal) if signal.isdigit() and int(signal) else None,
        )
    if not code.isdigit():
        return None, None
    status = int(code)
    if status & 0x7F:  # WIFSIGNALED: the low 7 bits name the signal (wait(2))
        return 0, status & 0x7F
    return (status >> 8) & 0xFF, None
