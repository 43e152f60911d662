"""A group of jobs (a sweep, a local array) as a job handle, what every kind's group says the same way: status is
one row per point, cancel ends every point, history lists every point's runs beside its values, and a point
(`--point I`) is a job handle of its own kind. Logs, requeue and resume name one point. Each kind's group:
slurmgen.backends.slurm_here.sweep (read from the submission journal, asked about in one squeue call),
slurmgen.backends.slurm_ssh.sweep, and slurmgen.backends.emulated.group (a local array or sweep, from the local
journal).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import LogView, Report, Say
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.queries.sweep_status import PointRow

FINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                   "BOOT_FAIL", "DEADLINE", "UNKNOWN", "gone"})  # fmt: skip


class Group:
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

    def args(self) -> tuple[str, ...]:
        raise self._one_point("args")

    def history_dirs(self) -> tuple[list[Path], str]:
        raise self._one_point("history")

    def point(self, index: int) -> JobHandle:
        raise NotImplementedError

    def indexes(self) -> list[int]:
        """The points that were submitted or run, in order."""
        raise NotImplementedError

    def shown(self, index: int) -> str:
        """A point's values as status shows them (`lr=0.001 seed=3`)."""
        raise NotImplementedError

    def history_points(self) -> list[tuple[int, str, list[Path]]] | None:
        """`history SWEEP`: each point's index, its values and the log directories of its latest job, whose run
        history holds its runs."""
        return [(index, self.shown(index), self.point(index).history_dirs()[0]) for index in self.indexes()]

    def requeue(self, hold: bool, finished: bool) -> Report:
        raise self._one_point("requeue")

    def resume(self, say: Say) -> Report:
        raise self._one_point("resume")

    def resubmit(self, wanted: Sequence[int], warn: Say) -> list[str]:
        """Run these points again as a new array, with the first submission's script; the new arrays' ids."""
        raise UsageError(f"sweep {self.label} ran on this machine: run its spec again (`slurmgen run SPEC`)")
