"""Sweeps on the command line: what `render` says of a sweep, and resubmit. `status`, `logs`, `cancel` and
`history` of a sweep (and its --point) go through the job interface like any job (slurmgen.backends.interface).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from slurmgen.cli.output import err
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.spec.model import JobSpec

commands = typer.Typer()


def render_lines(spec: JobSpec) -> list[str]:
    """What `render` says of a sweep on stderr: the arrays it would make (with Slurm's default MaxArraySize;
    submit reads the cluster's) and each point's values."""
    from slurmgen.submission.sweep_plan import DEFAULT_MAX_ARRAY_SIZE, split

    sweep = spec.sweep
    assert sweep is not None
    arrays = split(range(len(sweep.points)), DEFAULT_MAX_ARRAY_SIZE)
    limit = f"%{sweep.max_parallel}" if sweep.max_parallel else ""
    shown = ", ".join(f"--array={a.tasks}{limit} (points {a.indexes[0]}-{a.indexes[-1]})" for a in arrays)
    lines = [
        f"sweep: {len(sweep.points)} point(s); with Slurm's default MaxArraySize {DEFAULT_MAX_ARRAY_SIZE}: "
        f"{len(arrays)} array(s): {shown} (submit reads the cluster's MaxArraySize)"
    ]
    lines += [f"point {i}: {sweep.shown(i)}" for i in range(min(len(sweep.points), 20))]
    if len(sweep.points) > 20:
        lines.append(f"... and {len(sweep.points) - 20} more point(s) (every point's values are in the script)")
    return lines


PointsOpt = Annotated[str | None, typer.Option("--points", metavar="I,J", help="Rerun these points, e.g. 3,7.")]


@commands.command("resubmit", short_help="Rerun some points of a sweep as a new array.")
def resubmit_command(
    sweep: Annotated[str, typer.Argument(metavar="SWEEP", help="A sweep id, its spec or name, or any of its job ids.")],
    failed: Annotated[bool, typer.Option("--failed", help="Rerun the points whose latest run failed.")] = False,
    points: PointsOpt = None,
) -> None:
    """Rerun some points of a sweep as a new array, with the same values (the first submission's script)."""
    from slurmgen.backends.registry import group_of

    if failed == (points is not None):
        raise UsageError("give exactly one of --failed or --points I,J")
    try:
        group = group_of(sweep)
    except UsageError:
        raise UsageError(f"{sweep!r} is not a sweep in the journal; see `slurmgen status`") from None
    if failed:
        wanted = [r.index for r in group.rows() if r.failed]
        if not wanted:
            err(f"no point of sweep {group.label} failed; nothing to resubmit")
            return
    else:
        assert points is not None
        try:
            wanted = sorted({int(p) for p in points.split(",") if p.strip()})
        except ValueError:
            raise UsageError(f"--points {points}: give point indexes, e.g. --points 3,7") from None
    arrays = group.resubmit(wanted, err)
    err(f"resubmitted points {','.join(map(str, wanted))} of sweep {group.label} as array job(s) {', '.join(arrays)}")
    print(group.label, flush=True)
