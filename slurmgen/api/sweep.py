"""`slurmgen.Sweep`: a handle on a sweep (docs/sweeps.md), its points as array tasks of one or more arrays, submitted
to Slurm or run here.

Like `slurmgen.Job`, a handle holds only the sweep's id; the journal (where `submit` records every array of the
sweep) gives its arrays and points, and each question about their states is one `squeue` call however many points
the sweep has. `slurmgen sweep` commands of the CLI (`status`, `cancel`, `resubmit`) take the same paths.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmgen.backends.interface import Request
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.api.job import Job
    from slurmgen.backends.emulated.group import LocalGroup
    from slurmgen.backends.slurm_here.sweep import SlurmSweep
    from slurmgen.queries.sweep_status import PointRow
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec
    from slurmgen.submission.sweep_record import SweepRecord

Warn = Callable[[str], None]


def record_of(text: str) -> SweepRecord | None:
    """The sweep ``text`` names (its id, spec file, job name, or any job id of it), from the journal; None when it
    names no sweep. No Slurm query."""
    from slurmgen.journal import Journal, find_home
    from slurmgen.submission.sweep_record import load_record, sweep_id_of

    jobs = Journal(find_home()).jobs()
    sweep_id = sweep_id_of(text, jobs)
    return None if sweep_id is None else load_record(sweep_id, jobs)


class Sweep:
    """One sweep, submitted to Slurm or run here (`slurmgen run` of a spec with sweep:). `Sweep("<sweep id>")` (or
    its spec, name, or any job id of it) attaches from any process that finds the journal it was recorded in;
    nothing is asked until a method asks. It asks the job interface's sweep handle (slurmgen.backends.groups), as
    `slurmgen status/cancel SWEEP` do."""

    def __init__(self, sweep: str | Path, *, client: SlurmClient | None = None) -> None:
        from slurmgen.backends.registry import group_of

        self._group: SlurmSweep | LocalGroup = group_of(str(sweep), client)
        self._client = client

    @classmethod
    def for_record(cls, record: SweepRecord, *, client: SlurmClient | None = None) -> Sweep:
        """The handle of a sweep whose journal record is read already. No Slurm query."""
        from slurmgen.backends.registry import sweep_handle

        handle = cls.__new__(cls)
        handle._group, handle._client = sweep_handle(record, client), client
        return handle

    @property
    def id(self) -> str:
        return self._group.label

    def __repr__(self) -> str:
        return f"slurmgen.Sweep({self.id!r})"

    def __len__(self) -> int:
        return self._group.size

    def report(self) -> dict[str, Any]:
        """What `slurmgen report SWEEP --json` prints: the roll-up's goodput, wall and productive seconds, buckets,
        and each point's report (docs: goodput). From the points' run histories; no Slurm query."""
        return self._group.goodput().data

    def values(self, point: int) -> dict[str, Any]:
        """A point's parameter values. No Slurm query."""
        return self._group.values(point)

    def rows(self) -> list[PointRow]:
        """Every point's latest attempt (index, values, array task, state, restarts, elapsed, exit): the rows of
        `slurmgen status SWEEP`. One squeue call for the whole sweep (none for a sweep run here)."""
        from slurmgen.backends.registry import group_of

        self._group = group_of(self.id, self._client)  # a resubmission from another process adds arrays
        return self._group.rows()

    def points(self) -> list[dict[str, Any]]:
        """One dict per point: index, values, job (its latest array task), state, restarts, elapsed, exit_code.
        One squeue call."""
        return [
            {
                "index": r.index,
                "values": self.values(r.index),
                "job": r.job,
                "state": r.state,
                "restarts": r.restarts,
                "elapsed": r.elapsed,
                "exit_code": r.exit,
            }
            for r in self.rows()
        ]

    def status(self) -> dict[int, str]:
        """Point index -> its latest attempt's state word (`gone` once Slurm forgot it). One squeue call."""
        return {r.index: r.state for r in self.rows()}

    def wait(self, timeout: float | None = None, *, sleep: Callable[[float], None] = time.sleep) -> dict[int, str]:
        """Wait until no point is pending or running; the final states. One squeue call per poll, every 2 s backing
        off to 30 s while nothing changes; TimeoutError after ``timeout`` seconds (the sweep goes on)."""
        from slurmgen.queries.sweep_status import GONE
        from slurmgen.slurm.ids import JobState

        finals = {s.name for s in JobState if s.is_terminal} | {GONE}
        deadline = None if timeout is None else time.monotonic() + timeout
        pause, last = 2.0, None
        while True:
            now = self.status()
            if all(state.split(" ")[0] in finals for state in now.values()):  # FAILED (NODE_FAIL)
                return now
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"sweep {self.id} did not end within {timeout:g} s")
            pause = 2.0 if now != last else min(pause * 2, 30.0)
            last = now
            sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))

    def job(self, point: int) -> Job:
        """The Job of a point's latest attempt (its array task): logs, history, cancel. No Slurm query."""
        from slurmgen.api.job import Job

        return Job(self._group.point(point).label, client=self._client)

    def logs(self, point: int, rank: int | None = None, node: str | None = None) -> str:
        """A point's logs (see Job.logs). One scontrol query."""
        return self.job(point).logs(rank=rank, node=node)

    def cancel(self, point: int | None = None) -> list[str]:
        """Cancel one point, or every point still pending or running (for Slurm: every array of the sweep that
        still has a task); the ids cancelled. One squeue call and one scancel per live array."""
        if point is not None:
            job = self.job(point)
            job.cancel()
            return [job.id]
        return self._group.cancel_all()

    def resubmit(
        self, *, failed: bool = False, points: Sequence[int] | None = None, warn: Warn | None = None
    ) -> list[int]:
        """Rerun the failed points (FAILED, TIMEOUT, CANCELLED), or the ones named, as a new array with the first
        submission's script (the same values); the point indexes resubmitted (none: nothing failed). One squeue
        call (for ``failed``), one `scontrol show config` and one sbatch per array. A sweep run here: run its spec
        again."""
        if failed == (points is not None):
            raise UsageError("resubmit: give exactly one of failed=True or points=[...]")
        wanted = [r.index for r in self.rows() if r.failed] if failed else sorted(set(points or ()))
        if wanted:
            self._group.resubmit(wanted, warn or _ignore)
            self.rows()  # the journal has the new array now
        return wanted


def _ignore(line: str) -> None:
    del line


def submit_sweep(
    spec: str | Path | JobSpec | Mapping[str, Any],
    overrides: Mapping[str, object] | None = None,
    *,
    warn: Warn | None = None,
    cluster: str | None = None,
    args: Sequence[str] = (),
) -> Sweep:
    """Validate, render and submit a spec with `sweep:` as Slurm job arrays (see slurmgen.submit for ``spec``,
    ``overrides``, ``warn``, ``cluster`` and ``args``: the same words for every point); the sweep's handle. One
    `scontrol show config` and one sbatch per array (over ssh: one once-only submit call per array, after the
    snapshot)."""
    from slurmgen.api.submitting import request_for
    from slurmgen.backends.registry import backend_for

    request = request_for(spec, overrides, cluster, args=args)
    refusal = f"{request.source.path}: has no sweep: field; submit it with slurmgen.submit"
    request = Request(request.source, many=refusal)
    done = backend_for(request.source.profile).launch(request, warn or _ignore)
    return Sweep(done.label)
