"""What a user means by the job argument of status/logs/requeue/cancel: a Slurm job id in any form, a local job id
(`local-2`, a job `slurmgen run` ran here), or a spec file or job name meaning "the last job of that spec": the one
started most recently, submitted or local. Pure, given the journals' entries.

A job id is validated by slurmgen.slurm.ids before it reaches any Slurm command, so an argument can never smuggle an
option or a second id into scontrol or scancel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import UsageError
from slurmgen.journal import Entry, find, last_for, slurm_cluster
from slurmgen.slurm.ids import JobId, cluster_label, local_label, parse_cluster_job, parse_job_id, parse_local_id


@dataclass(frozen=True)
class Target:
    job: JobId
    entry: Entry | None  # the journal's record when the job was submitted with slurmgen from here
    local: bool = False  # a job `slurmgen run` ran here (its entry is the local journal's): Slurm never knew it
    named: str | None = None  # the cluster the user named (`alpha:123`), when they named one

    @property
    def cluster(self) -> str | None:
        """The cluster of a multi-cluster site the job is on, which every Slurm command about it names: the one
        the user named, else the one its sbatch named; None on a site with one cluster."""
        return self.named or slurm_cluster(self.entry)

    @property
    def label(self) -> str:
        """The job as the user names it: `local-2`, Slurm's id, or `cluster:id` on a multi-cluster site."""
        return local_label(self.key) if self.local else cluster_label(self.cluster, self.job)

    @property
    def key(self) -> str:
        """The job's key in log file names: `<array>_<task>` for an array task, else the job id."""
        return str(self.job.without_step())


LOCAL_KEY = "key"  # a local array task's entry: its key `<array>_<task>` (slurmgen.local.array)


def local_target(entry: Entry) -> Target:
    """A job run here, by its local journal entry: its number, or its key for an array task (`3_0`)."""
    key = entry.extra.get(LOCAL_KEY)
    return Target(parse_job_id(key if isinstance(key, str) and key else str(entry.job_id)), entry, local=True)


def resolve(
    text: str, jobs: list[Entry], journal: Path, cwd: Path | None = None, local: list[Entry] | None = None
) -> Target:
    """A job id (123, 123_4, 123+1, 123.batch; `alpha:123` on cluster alpha), a local id (local-2), or a spec
    path / job name: its most recent job, submitted (`jobs`, the submission journal) or run here (`local`: one entry
    per local job, its `time` the start of its latest run)."""
    local = local or []
    number = parse_local_id(text)
    if number is not None:
        entry = next((e for e in reversed(local) if number in (e.job_id, e.extra.get(LOCAL_KEY))), None)
        if entry is None:
            raise UsageError(
                f"no local job {text} in {journal.parent / 'local'}; run the command in the directory that ran it"
            )
        return local_target(entry)
    try:
        cluster, job = parse_cluster_job(text)
    except UsageError:
        pass
    else:
        return Target(job, find(jobs, str(job), cluster), named=cluster)
    submitted, ran = last_for(jobs, text, cwd), last_for(local, text, cwd)
    if ran is not None and ran.job_id and (submitted is None or ran.time >= submitted.time):
        return local_target(ran)
    if submitted is None or submitted.job_id is None:
        where = f"the journal {journal}" if jobs or local else f"the journal (none at {journal})"
        raise UsageError(
            f"{text!r} is not a Slurm job id nor a local one, and {where} has no job of a spec or job name {text!r}; "
            "give a job id (e.g. 123, 123_4 or local-2) or the spec you submitted or ran"
        )
    return Target(parse_job_id(submitted.job_id), submitted)
