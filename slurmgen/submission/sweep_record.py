"""A sweep as the journal knows it: its arrays (every attempt), its points' values, and which array task ran each
point last. Pure given the journal's entries and the run directory's resolved spec.

`SWEEP` on the command line is the sweep's id, the spec file or job name (its newest sweep), or any job id of it
(an array job id or one task, 123 or 123_4).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import UsageError
from slurmgen.journal import Entry, find, last_for
from slurmgen.slurm.ids import JobId, parse_job_id
from slurmgen.spec.sweep_points import SweepSpec
from slurmgen.submission.plan import RESOLVED
from slurmgen.submission.sweep_plan import expand
from slurmgen.submission.sweep_submit import ATTEMPT_KEY, COPY_KEY, OFFSET_KEY, SWEEP_KEY, TASKS_KEY


@dataclass(frozen=True)
class SweepRecord:
    sweep_id: str
    arrays: tuple[Entry, ...]  # the submitted arrays of every attempt, oldest first
    sweep: SweepSpec
    resolved: dict[str, object]  # the first submission's spec.resolved.json

    @property
    def first(self) -> Entry:
        return self.arrays[0]

    def latest(self) -> dict[int, tuple[JobId, int]]:
        """Point index -> (its latest array task, attempt): a resubmission replaces the earlier run of a point."""
        out: dict[int, tuple[JobId, int]] = {}
        for e in self.arrays:
            assert e.job_id is not None
            job = parse_job_id(e.job_id).job
            offset = int(e.extra[OFFSET_KEY])
            for task in expand(str(e.extra[TASKS_KEY])):
                out[offset + task] = (JobId(job, array_task=task), int(e.extra.get(ATTEMPT_KEY, 0)))
        return out

    def point_of(self, index: int) -> JobId:
        latest = self.latest()
        if index not in latest:
            raise UsageError(
                f"sweep {self.sweep_id} has no point {index}; its points are 0-{len(self.sweep.points) - 1}"
            )
        return latest[index][0]

    @property
    def attempts(self) -> int:
        return 1 + max(int(e.extra.get(ATTEMPT_KEY, 0)) for e in self.arrays)


def is_sweep(e: Entry) -> bool:
    return isinstance(e.extra.get(SWEEP_KEY), str)


def sweep_id_of(text: str, jobs: list[Entry], cwd: Path | None = None) -> str | None:
    """The sweep that ``text`` names, or None when it names no sweep (then it is a plain job)."""
    swept = [e for e in jobs if is_sweep(e)]
    if any(e.extra[SWEEP_KEY] == text for e in swept):
        return text
    try:
        job = parse_job_id(text)
    except UsageError:
        entry = last_for(jobs, text, cwd)
    else:
        entry = find(jobs, str(job))
    return str(entry.extra[SWEEP_KEY]) if entry is not None and is_sweep(entry) else None


def load_record(sweep_id: str, jobs: list[Entry]) -> SweepRecord:
    arrays = tuple(sorted((e for e in jobs if is_sweep(e) and e.extra[SWEEP_KEY] == sweep_id and e.job_id),
                          key=lambda e: (int(e.extra.get(ATTEMPT_KEY, 0)), e.time)))  # fmt: skip
    if not arrays:
        raise UsageError(f"the journal has no submitted array of sweep {sweep_id}")
    # a sweep submitted over ssh has its run directory on the cluster, and a copy here (backends.slurm_ssh.sweep_arrays)
    copy = arrays[0].extra.get(COPY_KEY)
    path = Path(copy if isinstance(copy, str) else arrays[0].run_dir) / RESOLVED
    try:
        resolved = json.loads(path.read_text(encoding="utf-8"))
        raw = resolved["spec"]["sweep"]
        sweep = SweepSpec(tuple(raw["params"]), tuple(tuple(point) for point in raw["points"]), raw.get("max_parallel"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the points of sweep {sweep_id} from {path}: {exc}") from None
    return SweepRecord(sweep_id, arrays, sweep, resolved)
