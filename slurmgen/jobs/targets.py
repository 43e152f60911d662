"""What a user means by the job argument of status/logs/requeue/cancel: a Slurm job id in any form, or a spec
file or job name meaning "the last job of that spec" from the journal. Pure, given the journal's entries.

A job id is validated by slurmgen.slurm.ids before it reaches any Slurm command, so an argument can never smuggle an
option or a second id into scontrol or scancel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import UsageError
from slurmgen.jobs.journal import Entry, find, last_for
from slurmgen.slurm.ids import JobId, parse_job_id


@dataclass(frozen=True)
class Target:
    job: JobId
    entry: Entry | None  # the journal's record when the job was submitted with slurmgen from here

    @property
    def key(self) -> str:
        """The job's key in log file names: `<array>_<task>` for an array task, else the job id."""
        return str(self.job.without_step())


def resolve(text: str, jobs: list[Entry], journal: Path, cwd: Path | None = None) -> Target:
    """A job id (123, 123_4, 123+1, 123.batch) or a spec path / job name from the journal."""
    try:
        job = parse_job_id(text)
    except UsageError:
        pass
    else:
        return Target(job, find(jobs, str(job)))
    entry = last_for(jobs, text, cwd)
    if entry is None or entry.job_id is None:
        where = f"the journal {journal}" if jobs else f"the journal (none at {journal})"
        raise UsageError(
            f"{text!r} is not a Slurm job id, and {where} has no job of a spec or job name {text!r}; "
            "give a job id (e.g. 123 or 123_4) or the spec you submitted"
        )
    return Target(parse_job_id(entry.job_id), entry)
