"""`slurmgen resume JOB`: bring back the work of a job that ended before it was done, from its last saved state.

One command, whatever ended the job (PreemptMode=CANCEL, a time limit without a requeue, a failure, a cancel by
hand, a budget used up):
- while Slurm still knows the job (MinJobAge after its end), it is requeued: `scontrol requeue`, which takes back
  a finished job (scontrol(1)); the same job id, so its state, logs and run history simply continue;
- once Slurm has forgotten it, its script is submitted again, exactly as it was (the run directory's job.sbatch),
  with SLURMGEN_RESUME_FROM=<its key>: the new job starts from the old job's state (the runtime accepts it only
  with the same spec) and then saves under its own id.
A job that is pending or running has nothing to resume. `plan_resume` decides (pure); `resume` carries it out.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from slurmgen import contract, run_history
from slurmgen.errors import UsageError
from slurmgen.journal import TOKEN_PREFIX, Entry, Journal, new_token
from slurmgen.queries.control import plan_requeue
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.ids import JobId
from slurmgen.slurm.showjob import JobInfo
from slurmgen.submission.plan import RESOLVED, SCRIPT_NAME
from slurmgen.submission.targets import Target


@dataclass(frozen=True)
class ResumeStep:
    how: str  # "requeue": the same job comes back; "resubmit": a new job starts from its state
    message: str
    requeue_target: str | None = None
    script: Path | None = None
    workdir: Path | None = None
    resume_from: str | None = None


def plan_resume(target: Target, infos: list[JobInfo]) -> ResumeStep:
    if infos:
        live = [i for i in infos if not i.state.is_terminal]
        if live:
            info = live[0]
            raise UsageError(
                f"job {info.job_id} is {info.state_name}: it has not ended, so there is nothing to resume "
                f"(slurmgen status {info.job_id})"
            )
        step = plan_requeue(target.job, infos, hold=False, finished=True)
        return ResumeStep(
            "requeue",
            f"{step.message}; it resumes from its last saved state",
            requeue_target=step.target,
        )
    entry = target.entry
    if entry is None:
        raise UsageError(
            f"Slurm no longer knows job {target.job}, and it was not submitted from here (no journal entry): "
            "resume it from the directory you submitted it from"
        )
    script = Path(entry.run_dir) / SCRIPT_NAME
    try:
        resolved = json.loads((Path(entry.run_dir) / RESOLVED).read_text(encoding="utf-8"))
        workdir = Path(resolved["workdir"])
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"cannot read the run directory {entry.run_dir} of job {target.job}: {exc}") from None
    if not script.is_file():
        raise UsageError(f"the script job {target.job} ran is gone ({script}); submit the spec again")
    return ResumeStep(
        "resubmit",
        f"Slurm no longer knows job {target.job}: submitting its script again ({script}); the new job starts from "
        f"job {target.key}'s last saved state",
        script=script,
        workdir=workdir,
        resume_from=target.key,
    )


def resume(client: SlurmClient, target: Target, journal: Journal) -> tuple[ResumeStep, JobId | None]:
    """Carry out the plan: the step taken, and the new job's id when the script was submitted again."""
    infos = client.show_jobs(target.job)
    step = plan_resume(target, infos)
    if step.how == "requeue":
        assert step.requeue_target is not None
        client.requeue(step.requeue_target)
        _record_requeue(target, infos)
        return step, None
    assert step.script is not None and step.workdir is not None and step.resume_from is not None
    entry = target.entry
    assert entry is not None
    token = new_token()
    args = (
        f"--chdir={step.workdir}",
        f"--export=ALL,{contract.RESUME_FROM}={step.resume_from}",
        f"--comment={TOKEN_PREFIX}{token}",
    )
    submitted = client.sbatch(step.script, args)
    journal.append(
        Entry(
            event="submitted",
            token=token,
            name=entry.name,
            spec=entry.spec,
            run_dir=entry.run_dir,
            script=str(step.script),
            time=time.time(),
            job_id=str(submitted.job_id),
            cluster=submitted.cluster or client.cluster,  # the cluster it was asked of (`--clusters`)
            log_dir=entry.log_dir,
            array=entry.array,
            # The script is the one the job ran, its arguments after `--` in it: kept for history, as the first's.
            extra={"resumes": step.resume_from, **({"args": list(entry.args)} if entry.args else {})},
        )
    )
    return step, submitted.job_id


def _record_requeue(target: Target, infos: list[JobInfo]) -> None:
    """Credit the requeue to this command in the job's run history (no cause: the run keeps the one it ended
    with, and a resume counts against neither budget), before the next run starts and would take it for an
    admin's. A job whose log directory is not known here keeps Slurm's attribution."""
    from slurmgen.queries.history import job_log_dirs

    dirs = job_log_dirs(target, infos)
    if len(dirs) == 1 and (dirs[0] / "history").is_dir():
        run = infos[0].restarts + 1  # plan_resume requeues only a job Slurm still knows: infos is not empty
        run_history.append(str(dirs[0]), "resume", run_history.REQUEUE, run, time.time())
