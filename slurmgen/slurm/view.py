"""What Slurm says about this job right now: is it being preempted, has it been requeued already?

A signal does not say why it came. SIGTERM is the time limit, `scancel`, a requeue, or a preemption; the
`--signal` user signal is the time limit's warning or (with the site's send_user_signal) a preemption. Slurm
records a preemption on the job: `scontrol show job` shows `PreemptTime` from the moment the job is selected
until it is requeued (src/slurmctld/job_mgr.c clears preempt_time when a job is requeued). During a grace time
the job is still RUNNING (its EndTime moved to the preemption plus GraceTime); with PreemptMode=REQUEUE and no
grace Slurm has requeued it already (Restarts one higher, COMPLETING or PENDING); with PreemptMode=CANCEL it is
COMPLETING and then PREEMPTED, not requeued.

One `scontrol show job` (a slurmctld RPC, some milliseconds), asked by rank 0 when the ranks agree to stop and by
the batch shell when a signal reaches it and when the step ends.

Slurm calls in the stop path are retried here, in one place (`retried`, which the requeue of slurmgen.requeue
shares): a stop must not turn one lost RPC into a lost job. slurmctld can be briefly unreachable or slow: a
failover, a restart, an RPC storm ("Socket timed out on send/recv operation", "Unable to contact slurm controller
(connect failure)"; scontrol(1) gives up after MessageTimeout, slurm.conf(5)). Each such call gets a few tries with
growing pauses. What is no fault of the moment (an unknown job, --no-requeue, a pending job, scontrol not
installed) is not retried: another try would answer the same. A call that still fails after its tries raises as
before; the callers turn that into "unknown" (keep the state, say so) or a marker for the batch shell, never an
escape. Standard library only (the in-task runtime uses it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from slurmgen.errors import SchedulerError, SchedulerMissing, SlurmgenError
from slurmgen.slurm.ids import JobState

if TYPE_CHECKING:
    from slurmgen.interruption.ending import SlurmSays
    from slurmgen.slurm.client import SlurmClient

# Slurm's own states and their meaning for a job that is stopping (slurmgen.slurm.ids.JobState).
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
        from slurmgen.interruption.ending import SlurmSays

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


# --- the retry of every stop-path call -------------------------------------------------------------------

# What SlurmClient says when no controller answers (slurm/client.py _UNREACHABLE): the controller may be back in
# a moment, unlike a client command that is not installed.
_UNREACHABLE_WORDS = "no Slurm controller reachable"


@dataclass(frozen=True)
class Retry:
    """How often and with which pauses (seconds) a stop-path Slurm call is tried; ``sleep`` is injectable."""

    tries: int = 3
    pauses: tuple[float, ...] = (1.0, 3.0)
    sleep: Callable[[float], None] = time.sleep

    def pause(self, attempt: int) -> float:
        """The pause after the failed try number ``attempt`` (0-based): the last pause repeats."""
        return self.pauses[min(attempt, len(self.pauses) - 1)] if self.pauses else 0.0


DEFAULT = Retry()


def transient(error: SlurmgenError) -> bool:
    """Could the same call succeed a moment later? A time-out, an unreachable controller, or a failure Slurm gave
    no known meaning to (slurm/client.py maps the known ones to their own classes, which are final)."""
    if isinstance(error, SchedulerMissing):
        return _UNREACHABLE_WORDS in str(error)
    from slurmgen.slurm.client import SchedulerTimeout

    return type(error) in (SchedulerError, SchedulerTimeout)


T = TypeVar("T")


def retried(call: Callable[[], T], retry: Retry = DEFAULT, *, failed: list[SlurmgenError] | None = None) -> T:
    """``call()``, tried again after a transient failure, up to ``retry.tries`` times; the last error is raised.
    ``failed`` collects the transient errors met on the way (a timed-out requeue may have taken effect)."""
    attempt = 0
    while True:
        try:
            return call()
        except SlurmgenError as error:
            attempt += 1
            if not transient(error) or attempt >= retry.tries:
                raise
            if failed is not None:
                failed.append(error)
            retry.sleep(retry.pause(attempt - 1))
