"""A Slurm sweep submitted from this machine as a job handle (slurmgen.backends.groups): its arrays and points read
from the submission journal (slurmgen.submission.sweep_record), their states from one squeue call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmgen.backends.groups import Group
from slurmgen.backends.interface import Report, Say

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.queries.goodput_view import Goodput
    from slurmgen.queries.sweep_status import PointRow
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.submission.sweep_record import SweepRecord


class SlurmSweep(Group):
    def __init__(self, record: SweepRecord, client: SlurmClient | None = None) -> None:
        self.record = record
        self._client = client

    @property
    def label(self) -> str:
        return self.record.sweep_id

    @property
    def client(self) -> SlurmClient:
        """This machine's Slurm client, naming the cluster the sweep's first array went to on a multi-cluster site."""
        from slurmgen.journal import slurm_cluster

        if self._client is None:
            from slurmgen.slurm.client import SlurmClient

            self._client = SlurmClient()
        return self._client.on_cluster(slurm_cluster(self.record.first))

    def rows(self) -> list[PointRow]:
        from slurmgen.queries import sweep_status as st

        return st.point_rows(self.record, st.query(self.client, self.record))

    def status(self) -> Report:
        from slurmgen.queries import sweep_status as st
        from slurmgen.queries.goodput_view import sweep_rollup_line

        rows = self.rows()
        return Report(out=(st.table(rows), st.summary(self.record, rows), *sweep_rollup_line(self.record)))

    def cancel_all(self) -> list[str]:
        """Cancel every array of the sweep that still has a task (scancel of the array job id cancels every task
        of it); the array ids cancelled. One squeue call and one scancel per live array."""
        from slurmgen.slurm.ids import parse_job_id

        arrays = sorted({parse_job_id(str(e.job_id)).job for e in self.record.arrays})
        live = {row.job.job for row in self.client.array_tasks(arrays) if not row.state.is_terminal}
        done = []
        for job in arrays:
            if job in live:
                self.client.cancel(job)
                done.append(str(job))
        return done

    def said_cancelled(self, label: str) -> str:
        return f"cancelled array {label} of sweep {self.label}"

    @property
    def size(self) -> int:
        return len(self.record.sweep.points)

    def resubmit(self, wanted: Sequence[int], warn: Say) -> list[str]:
        """One `scontrol show config` and one sbatch per array (split at MaxArraySize)."""
        from slurmgen.backends.slurm_here.sbatch import send_sweep_here
        from slurmgen.journal import Journal, find_home
        from slurmgen.submission.sweep_resubmit import plan_again
        from slurmgen.submission.sweep_submit import max_array_size

        for index in wanted:
            self.record.point_of(index)  # refuses an index the sweep does not have
        sp = plan_again(self.record, list(wanted), max_array_size(self.client))
        done = send_sweep_here(sp, self.client, Journal(find_home()), fresh=False)
        for problem in done.problems:
            warn(f"warning: {problem}")
        return [str(job) for job in done.jobs]

    def indexes(self) -> list[int]:
        return sorted(self.record.latest())

    def shown(self, index: int) -> str:
        return self.record.sweep.shown(index)

    def values(self, index: int) -> dict[str, object]:
        self.record.point_of(index)  # refuses an index the sweep does not have
        return dict(self.record.sweep.values(index))

    def point(self, index: int) -> JobHandle:
        from slurmgen.backends.slurm_here.job import SlurmJob
        from slurmgen.journal import find
        from slurmgen.submission.targets import Target

        job = self.record.point_of(index)
        return SlurmJob(Target(job, find(list(self.record.arrays), str(job))), self._client)  # the entry's cluster

    def goodput(self) -> Goodput:
        from slurmgen.queries.goodput_view import sweep_goodput

        return sweep_goodput(self.record)
