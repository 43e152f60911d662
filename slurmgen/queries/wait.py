"""`slurmgen submit --wait`: follow a job through its states to the end and turn its result into an exit code.

A requeued job passes RUNNING -> COMPLETING -> PENDING -> RUNNING with the same id, so only a terminal state
ends the wait (JobState.is_terminal), never a merely idle one. `outcome` and `describe` are pure; `follow` polls
`scontrol show job` with an injected sleep and reports every answer to a callback (the CLI's progress display).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slurmgen.errors import SchedulerError
from slurmgen.exit_codes import EXIT_FAILURE
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.ids import JobId, JobState
from slurmgen.slurm.showjob import JobInfo

FIRST_POLL = 0.25  # seconds; grows while nothing changes, back to this on every change
MAX_POLL = 2.0
GRACE = 15.0  # seconds a just-submitted job may be missing from scontrol before that is an error


@dataclass(frozen=True)
class WaitResult:
    exit_code: int
    message: str
    state: str = "UNKNOWN"
    job: str = ""


def _one(info: JobInfo) -> WaitResult:
    what = f"job {info.job_id} {info.state_name}"
    job, state = str(info.job_id), info.state_name
    if info.exit_signal:
        # The shell's convention: a process ended by signal N exits 128+N.
        return WaitResult(128 + info.exit_signal, f"{what}, ended by signal {info.exit_signal}", state, job)
    if info.exit_code:
        return WaitResult(info.exit_code, f"{what} with exit code {info.exit_code}", state, job)
    if info.state is JobState.COMPLETED:
        return WaitResult(0, f"{what}", state, job)
    # CANCELLED, TIMEOUT, NODE_FAIL, ... without a code of their own: still a failure.
    return WaitResult(EXIT_FAILURE, f"{what} (no exit code from Slurm; exiting {EXIT_FAILURE})", state, job)


def outcome(infos: Sequence[JobInfo]) -> WaitResult:
    """The exit code of finished records: the job's own; for an array the worst task's, with a summary."""
    results = [_one(i) for i in infos]
    if len(results) == 1:
        return results[0]
    worst = max(results, key=lambda r: r.exit_code)
    failed = sum(r.exit_code != 0 for r in results)
    summary = f"{len(results)} tasks, {failed} failed" + (f"; {worst.message}" if failed else "")
    return WaitResult(worst.exit_code, summary, worst.state, worst.job)


def result_line(job: str, state: str, code: int, failing: str | None = None) -> str:
    """The last line `submit --wait` prints on stdout, for scripts: `job=123 state=FAILED exit=3`, with
    `failing="rank 1 on node1 (exit 3)"` when a task failed on its own; `state=ERROR exit=125` when slurmgen itself
    or Slurm failed (then the job's fate is unknown or it was never submitted: `job=-`)."""
    line = f"job={job or '-'} state={state} exit={code}"
    return line + (f' failing="{failing}"' if failing else "")


def describe(infos: Sequence[JobInfo]) -> str:
    """One line for the progress display: each record's state, reason, nodes and restarts."""
    parts: list[str] = []
    for info in infos:
        text = f"{'job ' if not parts else ''}{info.job_id} {info.state.name}"
        if info.reason:
            text += f" ({info.reason})"
        if info.nodes and info.state in (JobState.RUNNING, JobState.COMPLETING):
            text += f" on {info.nodes}"
        if info.restarts:
            text += f", restarts {info.restarts}"
        parts.append(text)
    return "; ".join(parts)


def done(infos: Sequence[JobInfo]) -> bool:
    return bool(infos) and all(i.state.is_terminal for i in infos)


def follow(
    client: SlurmClient,
    job: JobId,
    report: Callable[[list[JobInfo]], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> WaitResult:
    """Poll until every record of ``job`` is terminal; returns its outcome. A job Slurm forgets meanwhile (an
    admin purge, a restarted controller) is an error: its result cannot be known any more."""
    started, seen, delay, last = clock(), False, FIRST_POLL, ""
    while True:
        infos = client.show_jobs(job)
        if job.array_task is not None:
            infos = [i for i in infos if i.job_id == job.without_step()]
        if not infos:
            if seen or clock() - started > GRACE:
                raise SchedulerError(f"job {job}: Slurm no longer knows it, so its result is unknown")
        else:
            seen = True
            report(infos)
            if done(infos):
                return outcome(infos)
        now = describe(infos)
        delay = FIRST_POLL if now != last else min(MAX_POLL, delay * 1.5)
        last = now
        sleep(delay)
