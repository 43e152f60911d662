"""A sweep as Slurm takes it: the points split into job arrays, and the sbatch options of each. Pure.

Slurm's MaxArraySize caps the array *index*, not the number of tasks: every task id must be below it
(slurm.conf(5) MaxArraySize; the default 1001 allows ids 0-1000). A sweep is therefore cut into arrays of at
most MaxArraySize points; each array's task ids start again at 0 and the script adds the array's offset
(SLURMGEN_SWEEP_OFFSET, passed with sbatch --export) to find its point: point = offset + task id, where the
offset is a multiple of MaxArraySize. A resubmission of some points uses the same rule, so a point keeps its
array task id modulo MaxArraySize.

max_parallel across several arrays: each array gets `%max_parallel` (sbatch(1) --array "%" separator) and
array k+1 depends on array k with `afterany:<array k's job id>`, which Slurm satisfies once every task of array k
has ended (job_array.shtml, "Job Dependencies": a dependency on the array job id waits for all tasks). So at most
one array runs at a time, with at most max_parallel tasks: never more than max_parallel points at once. The cost:
while the last tasks of an array finish, fewer than max_parallel points run. Without max_parallel the arrays
are independent and all may run at once.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slurmgen import contract
from slurmgen.errors import Problem, SpecError
from slurmgen.submission.plan import Plan, comment_for

DEFAULT_MAX_ARRAY_SIZE = 1001  # slurm.conf(5)
# sbatch refuses a script larger than max_script_size (slurm.conf(5) SchedulerParameters; default 4 MB), and the
# script holds one line per point (~90 bytes with two parameters): ~45,000 points at the default.
MAX_SCRIPT_BYTES = 4 * 1024 * 1024
PREVIOUS = "<job id of array {k}>"  # how a dry run shows a dependency on an array not yet submitted


def compress(ids: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8": sbatch's --array syntax."""
    out: list[str] = []
    ordered = sorted(set(ids))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def expand(text: str) -> list[int]:
    """ "0-2,5,7-9:2%4" -> [0, 1, 2, 5, 7, 9]: the task ids of an --array value or of squeue's 123_[...]."""
    ids: list[int] = []
    for part in text.split("%", 1)[0].split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part.strip())
        if match is None:
            raise ValueError(f"not an array range: {text!r}")
        start = int(match[1])
        end = int(match[2]) if match[2] else start
        ids.extend(range(start, end + 1, int(match[3] or 1)))
    return ids


@dataclass(frozen=True)
class SweepArray:
    offset: int  # the sweep index of task id 0
    task_ids: tuple[int, ...]

    @property
    def indexes(self) -> tuple[int, ...]:
        return tuple(self.offset + t for t in self.task_ids)

    @property
    def tasks(self) -> str:
        return compress(self.task_ids)


def split(indexes: Iterable[int], max_array_size: int) -> list[SweepArray]:
    """The arrays that run these sweep indexes, every task id below ``max_array_size``."""
    if max_array_size < 1:
        raise ValueError(f"MaxArraySize must be at least 1, got {max_array_size}")
    groups: dict[int, list[int]] = {}
    for index in sorted(set(indexes)):
        groups.setdefault(index // max_array_size, []).append(index % max_array_size)
    return [SweepArray(chunk * max_array_size, tuple(ids)) for chunk, ids in sorted(groups.items())]


@dataclass(frozen=True)
class SweepPlan:
    plan: Plan  # the one script and run directory every array shares
    sweep_id: str
    arrays: tuple[SweepArray, ...]
    max_parallel: int | None
    max_array_size: int
    attempt: int  # 0 for the sweep's first submission, n for its n-th resubmission

    def token(self, k: int) -> str:
        """Array k's own submission token (a lost sbatch reply is found again by it)."""
        return f"{self.plan.token}-a{k}"

    def sbatch_args(self, k: int, previous: str | None) -> tuple[str, ...]:
        """sbatch's options for array k; ``previous`` is array k-1's job id (max_parallel chains the arrays)."""
        array = self.arrays[k]
        spec = self.plan.spec
        limit = f"%{self.max_parallel}" if self.max_parallel else ""
        exports = f"ALL,{contract.SWEEP_ID}={self.sweep_id},{contract.SWEEP_OFFSET}={array.offset}"
        args = [
            f"--comment={comment_for(spec, self.token(k))}",
            f"--array={array.tasks}{limit}",
            f"--export={exports}",
        ]
        after = f"afterany:{previous}" if self.max_parallel and previous is not None else None
        if after is not None:
            # The command line beats the script's #SBATCH --dependency, so the spec's own dependency comes along.
            args.append(f"--dependency={spec.dependency},{after}" if spec.dependency else f"--dependency={after}")
        return tuple(args)

    def sbatch_argv(self, k: int, previous: str | None) -> list[str]:
        from slurmgen.slurm.client import SlurmClient

        return SlurmClient.sbatch_argv(self.plan.script_path, self.sbatch_args(k, previous))


def sweep_id_for(p: Plan) -> str:
    """The sweep's id: its name and its first submission's token; SLURMGEN_SWEEP_ID and the W&B group."""
    return f"{p.spec.name}-{p.token}"


def sweep_plan(
    p: Plan,
    max_array_size: int,
    indexes: Sequence[int] | None = None,
    sweep_id: str | None = None,
    attempt: int = 0,
) -> SweepPlan:
    """The arrays of a submission: every point, or ``indexes`` (a resubmission), in ascending order."""
    sweep = p.spec.sweep
    if sweep is None:
        raise ValueError(f"{p.spec.name} has no sweep")
    dependency = p.spec.dependency or ""
    if sweep.max_parallel and "?" in dependency:
        raise SpecError(
            [
                Problem(
                    str(p.source),
                    "dependency",
                    "a sweep with max_parallel chains its arrays with `,` (all of); "
                    "Slurm cannot mix it with `?` (any of): use `,` or drop max_parallel",
                )
            ]
        )
    size = len(p.script.encode())
    if size > MAX_SCRIPT_BYTES:
        why = (
            f"{len(sweep.points)} points make a {size / 2**20:.1f} MiB script, over Slurm's default max_script_size "
            "of 4 MiB (slurm.conf SchedulerParameters), so sbatch would refuse it; split the sweep into several specs"
        )
        raise SpecError([Problem(str(p.source), "sweep", why)])
    wanted = range(len(sweep.points)) if indexes is None else indexes
    return SweepPlan(
        plan=p,
        sweep_id=sweep_id or sweep_id_for(p),
        arrays=tuple(split(wanted, max_array_size)),
        max_parallel=sweep.max_parallel,
        max_array_size=max_array_size,
        attempt=attempt,
    )


def dry_run_lines(sp: SweepPlan, shown_points: int = 20) -> list[str]:
    """What submitting the sweep would do: the arrays (one sbatch each) and each point's values."""
    sweep = sp.plan.spec.sweep
    assert sweep is not None
    count = sum(len(a.task_ids) for a in sp.arrays)
    limit = f", at most {sp.max_parallel} at once" if sp.max_parallel else ""
    lines = [
        f"sweep {sp.sweep_id}: {count} point(s) in {len(sp.arrays)} array(s) (MaxArraySize {sp.max_array_size}){limit}"
    ]
    for k, array in enumerate(sp.arrays):
        previous = PREVIOUS.format(k=k) if k else None
        first, last = array.indexes[0], array.indexes[-1]
        lines.append(f"array {k + 1}: points {first}-{last} (offset {array.offset}), would run: "
                     f"{shlex.join(sp.sbatch_argv(k, previous))}")  # fmt: skip
    indexes = [i for a in sp.arrays for i in a.indexes]
    for index in indexes[:shown_points]:
        lines.append(f"point {index}: {sweep.shown(index)}")
    if len(indexes) > shown_points:
        lines.append(f"... and {len(indexes) - shown_points} more point(s) (every point's values are in the script)")
    return lines
