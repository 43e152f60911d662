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
    """{job id: Slurm's state word} for every id given, from ONE `squeue` call whatever their number. A job Slurm
    does not know (a wrong id, or it ended over MinJobAge ago) maps to UNKNOWN. Keys are the ids as Slurm spells
    them (`str(123)` -> "123", "123_4")."""
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.ids import as_job_id

    wanted = list(dict.fromkeys(as_job_id(i).without_step() for i in ids))
    if not wanted:
        return {}
    rows = (client or SlurmClient()).squeue(wanted, all_states=True)
    return {str(w): fold([r.state_name for r in rows if _matches(w, r)]) for w in wanted}
