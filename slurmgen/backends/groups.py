"""A sweep (or a local array) as a job handle: status is one row per point, cancel ends every point, and a point
(`--point I`) is a job handle of its own kind. Logs, history, requeue and resume name one point.

A Slurm sweep is read from the submission journal (slurmgen.submission.sweep_record) and asked about in one squeue call;
a local one from the local journal, where each point's runner recorded itself (slurmgen.local.array).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import LogView, Report, Say
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.goodput.view import Goodput
    from slurmgen.local.local_jobs import LocalRecord
    from slurmgen.queries.sweep_status import PointRow
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.submission.sweep_record import SweepRecord

FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                   "BOOT_FAIL", "DEADLINE", "UNKNOWN", "gone"})  # fmt: skip


class _Group:
    """What every group says the same way: it is many jobs, so a question about one names a point."""

    @property
    def label(self) -> str:
        raise NotImplementedError

    @property
    def notes(self) -> tuple[str, ...]:
        return ()

    def rows(self) -> list[PointRow]:
        raise NotImplementedError

    def _one_point(self, command: str) -> UsageError:
        return UsageError(f"{self.label} is a sweep; name one point: slurmgen {command} {self.label} --point I")

    def state(self) -> str:
        from slurmgen.queries.status import fold

        return fold([r.state.split(" ")[0] for r in self.rows() if r.state != "gone"])

    def exit_code(self) -> int | None:
        rows = self.rows()
        if not all(r.state.split(" ")[0] in FINAL for r in rows):
            return None
        codes = [int(r.exit) for r in rows if r.exit.isdigit()]
        return next((c for c in codes if c), 0)

    def wait(self, pause: Callable[[float], None]) -> str:
        while not all(r.state.split(" ")[0] in FINAL for r in self.rows()):
            pause(2.0)
        return self.state()

    def cancel_all(self) -> list[str]:
        raise NotImplementedError

    def said_cancelled(self, label: str) -> str:
        raise NotImplementedError

    def cancel(self, signal: str | None, to: str | None) -> Report:
        """Cancel every point still pending or running; a signal goes to one point (`--point I`)."""
        if signal is not None:
            raise UsageError(f"--signal goes to one point of sweep {self.label}: add --point I")
        notes = [self.said_cancelled(label) for label in self.cancel_all()]
        return Report(notes=tuple(notes) or (f"sweep {self.label} has no task left to cancel",))

    def logs(self, rank: int | None, node: str | None) -> LogView:
        raise self._one_point("logs")

    def code(self) -> str | None:
        return None  # the files in the job's directory, as they are

    def history_dirs(self) -> tuple[list[Path], str]:
        raise self._one_point("history")

    def requeue(self, hold: bool, finished: bool) -> Report:
        raise self._one_point("requeue")

    def resume(self, say: Say) -> Report:
        raise self._one_point("resume")

    def resubmit(self, wanted: Sequence[int], warn: Say) -> list[str]:
        """Run these points again as a new array, with the first submission's script; the new arrays' ids."""
        raise UsageError(f"sweep {self.label} ran on this machine: run its spec again (`slurmgen run SPEC`)")


class SlurmSweep(_Group):
    def __init__(self, record: SweepRecord, client: SlurmClient | None = None) -> None:
        self.record = record
        self._client = client

    @property
    def label(self) -> str:
        return self.record.sweep_id

    @property
    def client(self) -> SlurmClient:
        if self._client is None:
            from slurmgen.slurm.client import SlurmClient

            self._client = SlurmClient()
        return self._client

    def rows(self) -> list[PointRow]:
        from slurmgen.queries import sweep_status as st

        return st.point_rows(self.record, st.query(self.client, self.record))

    def status(self) -> Report:
        from slurmgen.goodput.view import sweep_rollup_line
        from slurmgen.queries import sweep_status as st

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

    def values(self, index: int) -> dict[str, object]:
        self.record.point_of(index)  # refuses an index the sweep does not have
        return dict(self.record.sweep.values(index))

    def point(self, index: int) -> JobHandle:
        from slurmgen.backends.slurm_here.job import SlurmJob
        from slurmgen.journal import find
        from slurmgen.submission.targets import Target

        job = self.record.point_of(index)
        return SlurmJob(Target(job, find(list(self.record.arrays), str(job))), self._client)

    def goodput(self) -> Goodput:
        from slurmgen.goodput.view import sweep_goodput

        return sweep_goodput(self.record)


class LocalGroup(_Group):
    """The tasks of one local array (a sweep's points, or a spec's `array:`), each a local job of its own."""

    def __init__(self, base: Path, label: str, records: Sequence[LocalRecord]) -> None:
        self.base = base
        self._label = label
        self.records = list(records)

    @property
    def label(self) -> str:
        return self._label

    def _latest(self) -> dict[int, LocalRecord]:
        from slurmgen.local.local_jobs import records

        mine = {r.job_id for r in self.records}  # read again: the states of now, in one read of the journal
        by_task = {int(r.key.rpartition("_")[2]): r for r in records(self.base) if r.job_id in mine}
        return dict(sorted(by_task.items()))

    def rows(self) -> list[PointRow]:
        from slurmgen.local.local_jobs import VALUES_EXTRA
        from slurmgen.queries.sweep_status import FAILED_STATES, PointRow
        from slurmgen.slurm.ids import parse_state

        rows = []
        for task, record in self._latest().items():
            code = record.entry.extra.get("exit_code")
            ended = record.state not in ("RUNNING", "UNKNOWN")
            rows.append(PointRow(
                task, str(record.entry.extra.get(VALUES_EXTRA) or ""), record.label, record.state,
                restarts=str(max(record.runs - 1, 0)) if record.runs else "",
                exit="" if not ended or code is None else str(code),
                failed=parse_state(record.state) in FAILED_STATES,
            ))  # fmt: skip
        return rows

    def status(self) -> Report:
        from slurmgen.queries.sweep_status import table

        rows = self.rows()
        counts = Counter(r.state for r in rows)
        parts = ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return Report(out=(table(rows), f"sweep {self.label}: {len(rows)} points: {parts}"))

    def cancel_all(self) -> list[str]:
        """Ask the runner of every point still running to end it (as scancel does); the points' ids cancelled."""
        from slurmgen.local import local_jobs

        done = []
        for record in self._latest().values():
            if local_jobs.live_runner(record.control) is None:
                continue
            try:
                local_jobs.cancel(record.control)
            except UsageError:  # it ended meanwhile
                continue
            done.append(record.label)
        return done

    def said_cancelled(self, label: str) -> str:
        return f"cancelled {label} of sweep {self.label}: its runner ends every process"

    @property
    def size(self) -> int:
        return len(self.records)

    def values(self, index: int) -> dict[str, object]:
        from slurmgen.local.local_jobs import PARAMS_EXTRA

        latest = self._latest()
        if index not in latest:
            raise self._no_point(index, latest)
        params = latest[index].entry.extra.get(PARAMS_EXTRA)
        return dict(params) if isinstance(params, dict) else {}

    def point(self, index: int) -> JobHandle:
        from slurmgen.backends.emulated.job import LocalJob

        latest = self._latest()
        if index not in latest:
            raise self._no_point(index, latest)
        return LocalJob(self.base, latest[index])

    def _no_point(self, index: int, latest: dict[int, LocalRecord]) -> UsageError:
        shown = ", ".join(map(str, latest)) or "none"
        return UsageError(f"sweep {self.label} has no point {index}; its points are {shown}")

    def goodput(self) -> Goodput:
        """Every task's report, one after the other (a local array has no sweep record to roll up)."""
        from slurmgen.backends.emulated.job import target_of
        from slurmgen.goodput.files import job_report
        from slurmgen.goodput.view import of_jobs

        return of_jobs([r for record in self._latest().values() for r in job_report(target_of(record), None)])
