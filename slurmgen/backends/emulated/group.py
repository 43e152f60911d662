"""The tasks of one local array or sweep run here (`slurmgen run`) as a job handle (slurmgen.backends.groups): each
point's runner recorded itself in the local journal (slurmgen.local.array)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.groups import Group
from slurmgen.backends.interface import Report
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.local.local_jobs import LocalRecord
    from slurmgen.queries.goodput_view import Goodput
    from slurmgen.queries.sweep_status import PointRow


class LocalGroup(Group):
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
        import time

        from slurmgen.local.local_jobs import VALUES_EXTRA
        from slurmgen.queries.sweep_status import FAILED_STATES, PointRow
        from slurmgen.slurm.ids import parse_state
        from slurmgen.slurm.times import format_duration

        rows = []
        now = time.time()
        for task, record in self._latest().items():
            code = record.entry.extra.get("exit_code")
            ended = record.state not in ("RUNNING", "UNKNOWN")
            elapsed = record.elapsed(now)
            rows.append(PointRow(
                task, str(record.entry.extra.get(VALUES_EXTRA) or ""), record.label, record.state,
                restarts=str(max(record.runs - 1, 0)) if record.runs else "",
                elapsed="" if elapsed is None else format_duration(int(elapsed)),  # as squeue's %M: whole seconds
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

    def shown(self, index: int) -> str:
        from slurmgen.local.local_jobs import VALUES_EXTRA

        latest = self._latest()
        return str(latest[index].entry.extra.get(VALUES_EXTRA) or "") if index in latest else ""

    def indexes(self) -> list[int]:
        return list(self._latest())

    def goodput(self) -> Goodput:
        """The sweep's roll-up (slurmgen.goodput.summary.SweepReport): every task's report with its point's values
        and the sums, as a Slurm sweep's; a plain `array:` job's tasks have no values."""
        from slurmgen.backends.emulated.job import target_of
        from slurmgen.local.local_jobs import PARAMS_EXTRA, VALUES_EXTRA
        from slurmgen.queries.goodput_files import points_report
        from slurmgen.queries.goodput_view import of_sweep

        latest = self._latest()
        work = [(task, target_of(record)) for task, record in latest.items()]
        params = {task: r.entry.extra.get(PARAMS_EXTRA) for task, r in latest.items()}
        values = {task: dict(v) if isinstance(v, dict) else {} for task, v in params.items()}
        shown = {task: str(r.entry.extra.get(VALUES_EXTRA) or "") for task, r in latest.items()}
        return of_sweep(points_report(self.label, work, values, shown, detail=False),
                        lambda: points_report(self.label, work, values, shown))  # fmt: skip
