"""`slurmgen.status(ids)`: the states of many jobs in one Slurm query.

Polling each job with its own `scontrol show job` costs slurmctld one RPC per job per poll (submitit #1759); a
single `squeue --jobs=a,b,c --states=all` answers for all of them at once, finished jobs included while Slurm
still keeps them (MinJobAge).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.ids import JobId
    from slurmgen.slurm.parse import QueueEntry

from slurmgen.queries.status import UNKNOWN, fold

__all__ = ["UNKNOWN", "fold", "status"]


def _matches(wanted: JobId, row: QueueEntry) -> bool:
    """Whether a squeue row is (part of) the job asked for: the job itself, one array task, or any task of an
    array asked by its array id (pending tasks come as one row, 123_[4-9])."""
    if wanted.array_task is not None:
        return row.job_id == wanted
    return row.job_id.job == wanted.job or row.raw_id == wanted.job


def status(ids: Iterable[str | int | JobId], *, client: SlurmClient | None = None) -> dict[str, str]:
    """{job id: Slurm's state word} for every id given, from ONE `squeue` call whatever their number (one per
    cluster for jobs of several clusters of a multi-cluster site, `alpha:123`). A job Slurm does not know (a wrong
    id, or it ended over MinJobAge ago) maps to UNKNOWN. Keys are the ids as Slurm spells them (`str(123)` ->
    "123", "123_4"), with their cluster when one was named (`alpha:123`)."""
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.ids import cluster_label, parse_cluster_job

    by_cluster: dict[str | None, list[JobId]] = {}
    for given in ids:
        cluster, job = parse_cluster_job(given) if isinstance(given, str | int) else (None, given)
        wanted = by_cluster.setdefault(cluster, [])
        if job.without_step() not in wanted:
            wanted.append(job.without_step())
    asker = client or SlurmClient()
    states: dict[str, str] = {}
    for cluster, wanted in by_cluster.items():
        rows = asker.on_cluster(cluster).squeue(wanted, all_states=True)
        for w in wanted:
            states[cluster_label(cluster, w)] = fold([r.state_name for r in rows if _matches(w, r)])
    return states
