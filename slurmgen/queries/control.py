"""`slurmgen requeue` and `slurmgen cancel`: look at the job first, explain, then act on exactly the right id.

The decisions (`plan_requeue`, `signal_route`) are pure functions of the job's records; `requeue` and `cancel`
ask Slurm and carry them out. Requeue semantics: scontrol(1) `requeue`, `requeuehold`, and
src/slurmctld/job_mgr.c `_job_requeue_op`; id forms: Slurm's job_array.shtml and heterogeneous_jobs.shtml; who
receives a signal: scancel(1) `--batch`, `--full` (the default reaches only the steps' tasks).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmgen.contract import CLEAN_EXIT_SIGNAL, SAVE_EXIT_SIGNAL
from slurmgen.errors import UsageError
from slurmgen.journal import TOKEN_PREFIX, Entry
from slurmgen.slurm.client import InvalidJobId, JobPending, RequeueDisabled, SlurmClient
from slurmgen.slurm.ids import JobId, JobState
from slurmgen.slurm.showjob import JobInfo
from slurmgen.submission.plan import RESOLVED

REQUEUEABLE = frozenset({JobState.RUNNING, JobState.SUSPENDED, JobState.PREEMPTED})


@dataclass(frozen=True)
class RequeueStep:
    target: str  # the id given to scontrol: one array task as <array>_<task>, a het job as its leader
    info: JobInfo
    message: str  # what is about to happen, in words


def unknown_job(job: JobId) -> InvalidJobId:
    return InvalidJobId(f"Slurm does not know job {job} (a wrong id, or it ended over MinJobAge ago)")


def _pick(job: JobId, infos: Sequence[JobInfo]) -> JobInfo:
    """The record the action is about; refuses a bare array id (it would act on every task)."""
    if job.array_task is not None:
        for info in infos:
            if info.job_id == job.without_step():
                return info
        raise unknown_job(job)
    tasks = [i for i in infos if i.job_id.array_task is not None or i.job_id.array_tasks is not None]
    if tasks:
        shown = ", ".join(str(i.job_id) for i in tasks[:4]) + (", ..." if len(tasks) > 4 else "")
        example = next((i.job_id for i in tasks if i.job_id.array_task is not None), None)
        raise UsageError(
            f"job {job.job} is an array ({shown}); requeueing {job.job} would requeue every task. "
            f"Name one task{f', e.g. {example}' if example else ''}"
        )
    het = [i for i in infos if i.job_id.het_offset is not None]
    if het:  # the leader's record (offset 0) speaks for the whole heterogeneous job
        wanted = job.het_offset or 0
        return next((i for i in het if i.job_id.het_offset == wanted), het[0])
    return infos[0]


def plan_requeue(job: JobId, infos: Sequence[JobInfo], *, hold: bool, finished: bool) -> RequeueStep:
    """Decide whether and how to requeue; raise with the reason when it makes no sense."""
    if not infos:
        raise unknown_job(job)
    info = _pick(job, infos)
    target = job.requeue_target()
    name = f"job {info.job_id}"
    if not info.requeue:
        raise RequeueDisabled(f"{name} cannot be requeued: it was submitted with --no-requeue (Requeue=0)")
    state = info.state
    if state in (JobState.PENDING, JobState.HELD):
        why = f" ({info.reason})" if info.reason else ""
        raise JobPending(f"{name} is {info.state_name}{why}: it is not running, so there is nothing to requeue")
    if state is JobState.COMPLETING:
        raise JobPending(f"{name} is COMPLETING (restarts {info.restarts}): wait until it settles, then try again")
    if state.is_terminal and not finished:
        raise UsageError(
            f"{name} already ended ({info.state_name}, exit {info.exit_code}:{info.exit_signal}); requeueing would "
            "run it again from the top. Pass --finished if that is what you want"
        )
    if state not in REQUEUEABLE and not state.is_terminal:
        raise UsageError(f"{name} is {info.state_name}, a state slurmgen does not requeue")
    parts = [f"{name} is {info.state_name}" + (f" on {info.nodes}" if info.nodes else "")]
    if info.job_id.het_offset is not None:
        parts.append(f"it is heterogeneous: Slurm requeues all its components together (as {target})")
    if state.is_active:
        parts.append("Slurm stops its tasks (SIGTERM, then SIGKILL after KillWait)")
    then = "holds it until `scontrol release " + target + "`" if hold else "starts the script again from the top"
    parts.append(f"it {then} as run {info.restarts + 2} (SLURM_RESTART_COUNT={info.restarts + 1})")
    verb = "requeueing and holding" if hold else "requeueing"
    return RequeueStep(target, info, f"{verb} {target}: " + "; ".join(parts))


def requeue_job(client: SlurmClient, job: JobId, *, hold: bool, finished: bool) -> RequeueStep:
    step = plan_requeue(job, client.show_jobs(job), hold=hold, finished=finished)
    client.requeue(step.target, hold=hold)
    return step


# --- cancel -------------------------------------------------------------------------------------------------


def trapped_signals(entry: Entry | None) -> list[str]:
    """The preemption signal the job's script traps, from its run directory's resolved spec (if known)."""
    if entry is None:
        return []
    try:
        resolved = json.loads((Path(entry.run_dir) / RESOLVED).read_text(encoding="utf-8"))
        pre = resolved["spec"]["preemption"]
        return [str(pre["signal"])] if pre["enabled"] else []
    except (OSError, ValueError, KeyError, TypeError):
        return []


def signal_route(sig: str, info: JobInfo, trapped: Sequence[str] = ()) -> tuple[str, str]:
    """("batch" | "steps", why). A slurmgen script traps TERM, USR2 and its preemption signal in the batch shell
    and forwards them to the step, even one that has not started yet; scancel's default (the steps only) loses a
    signal sent before srun runs. Any other job, or a signal the script does not trap, goes to the steps."""
    ours = TOKEN_PREFIX in info.fields.get("Comment", "")
    if ours and sig in {CLEAN_EXIT_SIGNAL, SAVE_EXIT_SIGNAL, *trapped}:
        return "batch", "the batch shell of this slurmgen job traps it and forwards it to every task"
    return "steps", "scancel's default: the tasks of the running steps (the batch shell is left alone)"


@dataclass(frozen=True)
class CancelStep:
    target: str
    info: JobInfo
    signal: str | None
    route: str  # "batch", "steps" or "all" when signalling; "" for a plain cancel
    message: str


# Waiting to run, or between two runs: nothing receives a signal.
_NOT_RUNNING = frozenset({JobState.PENDING, JobState.HELD, JobState.COMPLETING, JobState.PREEMPTED})


def plan_cancel(
    job: JobId, infos: Sequence[JobInfo], sig: str | None, route: str | None, trapped: Sequence[str] = ()
) -> CancelStep | None:
    """What to do, or None when there is nothing to do (the job ended already and no signal was asked for)."""
    if not infos:
        raise unknown_job(job)
    info = next((i for i in infos if i.job_id == job.without_step()), infos[0])
    target = job.cancel_target()
    live = [i for i in infos if not i.state.is_terminal]
    if sig is None:
        if not live:
            return None
        return CancelStep(target, info, None, "", f"cancelling {target} ({info.state_name})")
    if not live:
        raise UsageError(f"job {target} already ended ({info.state_name}); there is nobody to signal")
    if all(i.state in _NOT_RUNNING for i in live):
        # scancel --signal retries such a job for ~95 s (5 s, 6 s, ...) and, should a requeued job start
        # meanwhile, delivers the signal to that later run.
        raise JobPending(
            f"job {target} is {info.state_name}: no task runs to receive SIG{sig} (scancel would retry for up to "
            f"95 s and could signal a later run). Send it once the job runs, or cancel it: slurmgen cancel {target}"
        )
    why = "as asked"
    if route is None:
        route, why = signal_route(sig, info, trapped)
    return CancelStep(target, info, sig, route, f"sending SIG{sig} to {target} ({route}: {why})")


def cancel_job(
    client: SlurmClient, job: JobId, sig: str | None, route: str | None, trapped: Sequence[str] = ()
) -> CancelStep | None:
    step = plan_cancel(job, client.show_jobs(job), sig, route, trapped)
    if step is not None:
        client.cancel(step.target, signal=step.signal, batch=step.route == "batch", full=step.route == "all")
    return step
