"""The resume flag: `resume.args` appended to the command and `resume.env` set, on a start that should resume.

Decided in the job, in each task, just before the program starts, where the checkpoint (spec field
checkpoint.path, relative to the job's directory) is visible: the render cannot know whether the program has
saved yet. A start resumes when the checkpoint exists and this is not the first start of a fresh job: a requeue
(run 2 and later), a restart inside the allocation (SLURMGEN_STEP_ATTEMPT above 0), `slurmgen resume` or the
continuation of a preempted job (SLURMGEN_RESUME_FROM). The very first start never resumes, not even when a
checkpoint is already there: it was left by another job (an earlier submission of the same spec, a colleague's
copy), and a fresh job starting from it would silently continue someone else's training; rank 0 says so in one
line, with the two ways to use it on purpose. torchrun's workers run this entry point again under an agent that
already appended the words (SLURMGEN_RESUMED), and do not append them twice. Standard library only.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import MutableMapping

from slurmgen import contract
from slurmgen.job_context.context import JobContext


def resuming(job: JobContext, checkpoint_there: bool) -> bool:
    """Whether this start gets resume.args and resume.env."""
    later = job.run > 1 or job.step_attempt > 0 or bool(job.resume_from)
    told = bool(job.resume_args or job.resume_env)  # checkpoint.path alone: watched, never a flag
    return bool(job.checkpoint) and told and checkpoint_there and later and not job.resumed


def apply(
    job: JobContext, command: list[str], environ: MutableMapping[str, str], cwd: str = ""
) -> tuple[list[str], str | None]:
    """The command to start and the line rank 0 says about it (None: nothing to say); ``environ`` gets resume.env
    on a resumed start."""
    if not job.checkpoint or job.resumed:
        return command, None
    from slurmgen.task.checkpoint_watch import exists

    there = exists(job.checkpoint, cwd or os.getcwd())
    speaks = job.task_id in ("0", "")
    if not resuming(job, there):
        if there and job.run == 1 and job.step_attempt == 0 and not job.resume_from and speaks:
            return command, (
                f"{job.checkpoint} exists before this job's first start, so it is another job's: run 1 starts "
                "without resume.args; remove it to start clean, or `slurmgen resume` the job that wrote it"
            )
        return command, None
    words = shlex.split(job.resume_args) if job.resume_args else []
    pairs = [word.partition("=") for word in shlex.split(job.resume_env)] if job.resume_env else []
    environ.update({name: value for name, _, value in pairs})
    environ[contract.RESUMED] = "1"
    how = " ".join(shlex.quote(w) for w in words) or "resume.env only"
    start = f"run {job.run}" + (f", restart {job.step_attempt}" if job.step_attempt else "")
    return [*command, *words], (f"resuming from {job.checkpoint} ({start}): {how}" if speaks else None)
