"""What Slurm says about this job right now: is it being preempted, has it been requeued already?

A signal does not say why it came. SIGTERM is the time limit, `scancel`, a requeue, or a preemption; the
`--signal` user signal is the time limit's warning or (with the site's send_user_signal) a preemption. Slurm
records a preemption on the job: `scontrol show job` shows `PreemptTime` from the moment the job is selected
until it is requeued (src/slurmctld/job_mgr.c clears preempt_time when a job is requeued). During a grace time
the job is still RUNNING (its EndTime moved to the preemption plus GraceTime); with PreemptMode=REQUEUE and no
grace Slurm has requeued it already (Restarts one higher, COMPLETING or PENDING); with PreemptMode=CANCEL it is
COMPLETING and then PREEMPTED, not requeued.

One `scontrol show job` (a slurmctld RPC, some milliseconds), asked by rank 0 when the ranks agree to stop and by
the batch shell when a signal reaches it and when the step ends, retried like every stop-path call
(slurmgen.slurm.retry). Standard library only (the in-task runtime uses it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from slurmgen.errors import SlurmgenError
from slurmgen.interruption.ending import SlurmSays
from slurmgen.slurm.ids import JobState
from slurmgen.slurm.retry import DEFAULT, Retry, retried

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient

_STILL_RUNNING = frozenset({JobState.RUNNING, JobState.SUSPENDED})


@dataclass(frozen=True)
class SlurmView:
    state: JobState
    state_name: str
    restarts: int  # Restarts=: how often the job was requeued so far (Slurm's count)
    preempt_time: datetime | None
    end_time: datetime | None
    partition: str | None

    def preempted(self) -> bool:
        return self.preempt_time is not None

    def running(self) -> bool:
        return self.state in _STILL_RUNNING

    def requeued_since(self, restart_count: int) -> bool:
        """Requeued after the run that has SLURM_RESTART_COUNT ``restart_count`` started (by anyone)."""
        return self.restarts > restart_count

    def mode(self, restart_count: int) -> str | None:
        """The PreemptMode the job's state shows, when it is preempted: REQUEUE (Slurm requeued it), CANCEL (it
        is ending without a requeue), or None (still running in its grace time: either may follow)."""
        if not self.preempted():
            return None
        if self.requeued_since(restart_count):
            return "REQUEUE"
        return None if self.running() else "CANCEL"

    def says(self, restart_count: int) -> SlurmSays:
        """This view as the interruption decision takes it (slurmgen/interruption/)."""
        running, requeued, mode = self.running(), self.requeued_since(restart_count), self.mode(restart_count)
        return SlurmSays(running, self.preempted(), requeued, mode, self.state_name)


def look(key: str, client: SlurmClient | None = None, retry: Retry | None = None) -> SlurmView | None:
    """This job as slurmctld sees it; None when it cannot be asked (no scontrol here, inside a container, no
    answer in time, after the retries of `retried`) or does not know the job."""
    from slurmgen.slurm.client import SlurmClient

    asker = client or SlurmClient(timeout=10.0)
    try:
        info = retried(lambda: asker.show_job(key), retry or DEFAULT)
    except SlurmgenError:
        return None
    if info is None:
        return None
    return SlurmView(info.state, info.state_name, info.restarts, info.preempt_time, info.end_time, info.partition)
