"""`slurmgen.Sweep`: a handle on a sweep (README "Sweeps"), its points as array tasks of one or more arrays.

Like `slurmgen.Job`, a handle holds only the sweep's id; the journal (where `submit` records every array of the
sweep) gives its arrays and points, and each question about their states is one `squeue` call however many points
the sweep has. `slurmgen sweep` commands of the CLI (`status`, `cancel`, `resubmit`) take the same paths.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.api.job import Job
    from slurmgen.jobs.plan import Plan
    from slurmgen.jobs.sweep_record import SweepRecord
    from slurmgen.jobs.sweep_status import PointRow
    from slurmgen.jobs.sweep_submit import SweepSubmission
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec

Warn = Callable[[str], None]


def record_of(text: str) -> SweepRecord | None:
    """The sweep ``text`` names (its id, spec file, job name, or any job id of it), from the journal; None when it
    names no sweep. No Slurm query."""
    from slurmgen.jobs.journal import Journal, find_home
    from slurmgen.jobs.sweep_record import load_record, sweep_id_of

    jobs = Journal(find_home()).jobs()
    sweep_id = sweep_id_of(text, jobs)
    return None if sweep_id is None else load_record(sweep_id, jobs)


def submit_planned(p: Plan, base: Path, client: SlurmClient, warn: Warn) -> tuple[SweepSubmission, int]:
    """sbatch every array of a planned sweep (one sbatch per array, split at the cluster's MaxArraySize); the
    submission and its number of points. One `scontrol show config` and one sbatch per array."""
    from slurmgen.jobs import submit as submitting
    from slurmgen.jobs.journal import Journal
    from slurmgen.jobs.sweep_plan import sweep_plan
    from slurmgen.jobs.sweep_submit import max_array_size, submit_sweep

    journal = Journal(base)
    for note in submitting.settle_unresolved(journal, client):
        warn(note)
    sp = sweep_plan(p, max_array_size(client))
    done = submit_sweep(sp, client, journal)
    for problem in done.problems:
        warn(f"warning: {problem}")
    return done, sum(len(a.task_ids) for a in sp.arrays)


class Sweep:
    """One sweep. `Sweep("<sweep id>")` (or its spec, name, or any job id of it) attaches from any process that
    finds the journal it was submitted with; nothing is asked until a method asks."""

    def __init__(self, sweep: str | Path, *, client: SlurmClient | None = None) -> None:
        record = record_of(str(sweep))
        if record is None:
            raise UsageError(f"{sweep!s}: no sweep of that id, spec, name or job id in the journal")
        self._record = record
        self._client = client

    @classmethod
    def for_record(cls, record: SweepRecord, *, client: SlurmClient | None = None) -> Sweep:
        """The handle of a sweep whose journal record is read already. No Slurm query."""
        handle = cls.__new__(cls)
        handle._record, handle._client = record, client
        return handle

    @property
    def id(self) -> str:
        return self._record.sweep_id

    def __repr__(self) -> str:
        return f"slurmgen.Sweep({self.id!r})"

    @property
    def client(self) -> SlurmClient:
        if self._client is None:
            from slurmgen.slurm.client import SlurmClient

            self._client = SlurmClient()
        return self._client

    def __len__(self) -> int:
        return len(self._record.sweep.points)

    def report(self) -> dict[str, Any]:
        """What `slurmgen report SWEEP --json` prints: the roll-up's goodput, wall and productive seconds, buckets,
        and each point's report (docs: goodput). From the points' run histories; no Slurm query."""
        from slurmgen.jobs.goodput_files import sweep_report

        return sweep_report(self._record).to_json()

    def values(self, point: int) -> dict[str, Any]:
        """A point's parameter values. No Slurm query."""
        self._record.point_of(point)  # refuses an index the sweep does not have
        return dict(self._record.sweep.values(point))

    def rows(self) -> list[PointRow]:
        """Every point's latest attempt (index, values, array task, state, restarts, elapsed, exit): the rows of
        `slurmgen status SWEEP`. One squeue call for the whole sweep."""
        from slurmgen.jobs import sweep_status as st

        self._record = record_of(self.id) or self._record  # a resubmission from another process adds arrays
        return st.point_rows(self._record, st.query(self.client, self._record))

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
        from slurmgen.jobs.sweep_status import GONE
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

        return Job(self._record.point_of(point), client=self._client)

    def logs(self, point: int, rank: int | None = None, node: str | None = None) -> str:
        """A point's logs (see Job.logs). One scontrol query."""
        return self.job(point).logs(rank=rank, node=node)

    def cancel(self, point: int | None = None) -> list[str]:
        """Cancel one point, or every array of the sweep that still has a task; the array job ids cancelled. One
        squeue call and one scancel per live array."""
        if point is not None:
            self.job(point).cancel()
            return [str(self._record.point_of(point))]
        from slurmgen.slurm.ids import parse_job_id

        arrays = sorted({parse_job_id(str(e.job_id)).job for e in self._record.arrays})
        live = {row.job.job for row in self.client.array_tasks(arrays) if not row.state.is_terminal}
        done = []
        for job in arrays:
            if job in live:
                self.client.cancel(job)  # the array job id: scancel(1) cancels every task of the array
                done.append(str(job))
        return done

    def resubmit(
        self, *, failed: bool = False, points: Sequence[int] | None = None, warn: Warn | None = None
    ) -> list[int]:
        """Rerun the failed points (FAILED, TIMEOUT, CANCELLED), or the ones named, as a new array with the first
        submission's script (the same values); the point indexes resubmitted (none: nothing failed). One squeue
        call (for ``failed``), one `scontrol show config` and one sbatch per array."""
        from slurmgen.jobs.journal import Journal, find_home
        from slurmgen.jobs.sweep_resubmit import plan_again
        from slurmgen.jobs.sweep_submit import max_array_size, submit_sweep

        if failed == (points is not None):
            raise UsageError("resubmit: give exactly one of failed=True or points=[...]")
        wanted = [r.index for r in self.rows() if r.failed] if failed else sorted(set(points or ()))
        for index in wanted:
            self._record.point_of(index)
        if not wanted:
            return []
        sp = plan_again(self._record, wanted, max_array_size(self.client))
        done = submit_sweep(sp, self.client, Journal(find_home()), fresh=False)
        for problem in done.problems:
            (warn or _ignore)(f"warning: {problem}")
        self._record = record_of(self.id) or self._record
        return wanted


def _ignore(line: str) -> None:
    del line


def submit_sweep(
    spec: str | Path | JobSpec | Mapping[str, Any],
    overrides: Mapping[str, object] | None = None,
    *,
    warn: Warn | None = None,
) -> Sweep:
    """Validate, render and submit a spec with `sweep:` as Slurm job arrays (see slurmgen.submit for ``spec``,
    ``overrides`` and ``warn``); the sweep's handle. One `scontrol show config` and one sbatch per array."""
    from slurmgen.api.submitting import planned, spec_source
    from slurmgen.jobs.journal import home
    from slurmgen.slurm.client import SlurmClient

    source = spec_source(spec, overrides)
    base = home()
    p = planned(source, None, base, warn or _ignore)
    if p.spec.sweep is None:
        raise UsageError(f"{source.path}: has no sweep: field; submit it with slurmgen.submit")
    client = SlurmClient()
    done, _ = submit_planned(p, base, client, warn or _ignore)
    return Sweep(done.sweep_id, client=client)
