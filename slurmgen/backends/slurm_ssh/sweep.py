"""A sweep submitted to a cluster over ssh (`submit SWEEP --cluster NAME`, slurmgen.backends.slurm_ssh.sweep_arrays):
the sweep handle of slurmgen.backends.slurm_here.sweep with Slurm's commands run on the cluster through its one shared
connection (status: one squeue for every array, cancel: one squeue and one scancel per live array), and each point a
remote job (slurmgen.backends.slurm_ssh.job) for its logs, history, requeue and resume."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import Report, Say
from slurmgen.backends.slurm_here.sweep import SlurmSweep
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.queries.goodput_view import Goodput
    from slurmgen.spec.profile import ClusterProfile
    from slurmgen.submission.sweep_record import SweepRecord


class RemoteSweep(SlurmSweep):
    def __init__(self, record: SweepRecord, profile: ClusterProfile, base: Path) -> None:
        from slurmgen.backends.slurm_ssh.remote_status import transport_runner
        from slurmgen.remote.transport import transport_for
        from slurmgen.slurm.client import SlurmClient

        transport = transport_for(profile.name, profile.host, profile.control_persist)
        super().__init__(record, SlurmClient(run=transport_runner(transport)))
        self.profile = profile
        self.base = base

    def status(self) -> Report:
        """The points' table from one squeue on the cluster; the goodput roll-up reads run histories that stay
        there, so it is left to each point's `slurmgen history`."""
        from slurmgen.backends.slurm_ssh.job import code_of
        from slurmgen.queries import sweep_status as st

        rows = self.rows()
        notes = (f"cluster {self.profile.name}; code: {code_of(self.record.first.extra)}",)
        return Report(out=(st.table(rows), st.summary(self.record, rows)), notes=notes)

    def point(self, index: int) -> JobHandle:
        from slurmgen.backends.slurm_ssh.job import RemoteJob
        from slurmgen.journal import find
        from slurmgen.submission.targets import Target

        job = self.record.point_of(index)
        entry = find(list(self.record.arrays), str(job))
        assert entry is not None  # point_of found the job in these arrays
        return RemoteJob(Target(job, entry), entry, self.profile, self.base)

    def resubmit(self, wanted: Sequence[int], warn: Say) -> list[str]:
        raise UsageError(f"sweep {self.label} runs on cluster {self.profile.name}: resubmitting its points over ssh "
                         "is not supported yet; submit its spec again with --cluster")  # fmt: skip

    def goodput(self) -> Goodput:
        raise UsageError(f"sweep {self.label} runs on cluster {self.profile.name}: its roll-up reads run histories "
                         f"there; run `slurmgen report {self.label}` on the cluster's login node")  # fmt: skip
