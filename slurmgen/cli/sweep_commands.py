"""Sweeps on the command line: submit (and its dry run), status, the --point of logs/cancel/history, resubmit.

`status`, `logs`, `cancel` and `history` call in here first: when their argument names a sweep (its id, spec,
name, or any of its job ids) this module answers; otherwise the plain job commands do.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurmgen.cli.output import err
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.jobs.plan import Plan
    from slurmgen.jobs.sweep_record import SweepRecord
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec

commands = typer.Typer()


def _max_array_size(client: SlurmClient, dry_run: bool) -> int:
    from slurmgen.errors import SchedulerError, SchedulerMissing
    from slurmgen.jobs.sweep_plan import DEFAULT_MAX_ARRAY_SIZE
    from slurmgen.jobs.sweep_submit import max_array_size

    if not dry_run:
        return max_array_size(client)
    try:
        return max_array_size(client)
    except (SchedulerError, SchedulerMissing) as exc:
        err(f"note: cannot read MaxArraySize ({exc}); the dry run assumes Slurm's default {DEFAULT_MAX_ARRAY_SIZE}")
        return DEFAULT_MAX_ARRAY_SIZE


def render_lines(spec: JobSpec) -> list[str]:
    """What `render` says of a sweep on stderr: the arrays it would make (with Slurm's default MaxArraySize;
    submit reads the cluster's) and each point's values."""
    from slurmgen.jobs.sweep_plan import DEFAULT_MAX_ARRAY_SIZE, split

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


def dry_run(p: Plan) -> None:
    """`submit --dry-run` of a sweep: the script on stdout; the arrays and each point's values on stderr."""
    from slurmgen.jobs.plan import dry_run_lines as plan_lines
    from slurmgen.jobs.sweep_plan import dry_run_lines, sweep_plan
    from slurmgen.slurm.client import SlurmClient

    sp = sweep_plan(p, _max_array_size(SlurmClient(), dry_run=True))
    sys.stdout.write(p.script)
    for line in plan_lines(p)[:2]:  # the files it would write; the sbatch lines follow, one per array
        err(line)
    for line in dry_run_lines(sp):
        err(line)


def submit(p: Plan, base: Path) -> None:
    """Submit every array of a sweep: its id alone on stdout (status, logs, cancel and resubmit take it)."""
    from slurmgen.api.sweep import submit_planned
    from slurmgen.slurm.client import SlurmClient

    done, points = submit_planned(p, base, SlurmClient(), err)
    err(f"submitted sweep {done.sweep_id}: {points} points as array job(s) {', '.join(map(str, done.jobs))}; "
        f"run dir {p.run_dir}; follow it with: slurmgen status {done.sweep_id}")  # fmt: skip
    print(done.sweep_id, flush=True)


def record_for(text: str) -> SweepRecord | None:
    """The sweep ``text`` names, from the journal; None when it names no sweep."""
    from slurmgen.api.sweep import record_of

    return record_of(text)


def status(text: str) -> bool:
    """Print the sweep's table if ``text`` names a sweep; False when it does not."""
    from slurmgen.jobs import sweep_status as st
    from slurmgen.slurm.client import SlurmClient

    record = None if _one_task(text) else record_for(text)  # 123_4: that task alone, as for any array
    if record is None:
        return False
    rows = st.point_rows(record, st.query(SlurmClient(), record))
    print(st.table(rows))
    print(st.summary(record, rows))
    from slurmgen.jobs.goodput_files import sweep_report

    roll = sweep_report(record).to_json()  # the roll-up of every point's run history (slurmgen report SWEEP)
    if roll["points"]:
        print(f"goodput so far: {roll['goodput']:.1%} over {len(roll['points'])} point(s) with a run history")
    return True


def _one_task(text: str) -> bool:
    from slurmgen.slurm.ids import parse_job_id

    try:
        return parse_job_id(text).array_task is not None
    except UsageError:
        return False


def point_job(text: str, point: int | None, command: str) -> str:
    """The job argument to act on: a sweep point's latest array task (`123_4`), or ``text`` for a plain job."""
    record = None if _one_task(text) and point is None else record_for(text)  # 123_4 is one point already
    if record is None:
        if point is not None:
            raise UsageError(f"--point: {text!r} is not a sweep (see `slurmgen status {text}`)")
        return text
    if point is None:
        if command == "cancel":
            return text
        raise UsageError(f"{text!r} is sweep {record.sweep_id}; name one point: slurmgen {command} {text} --point I")
    return str(record.point_of(point))


def cancel_sweep(text: str, signal: str | None = None) -> bool:
    """Cancel every array of a sweep (every attempt still in Slurm); False when ``text`` names no sweep."""
    record = None if _one_task(text) else record_for(text)
    if record is None:
        return False
    if signal is not None:
        raise UsageError(f"--signal goes to one point of sweep {record.sweep_id}: add --point I")
    from slurmgen.api.sweep import Sweep

    cancelled = Sweep.for_record(record).cancel()
    for job in cancelled:
        err(f"cancelled array {job} of sweep {record.sweep_id}")
    if not cancelled:
        err(f"sweep {record.sweep_id} has no task left to cancel")
    return True


PointsOpt = Annotated[str | None, typer.Option("--points", metavar="I,J", help="Rerun these points, e.g. 3,7.")]


@commands.command("resubmit")
def resubmit_command(
    sweep: Annotated[str, typer.Argument(metavar="SWEEP", help="A sweep id, its spec or name, or any of its job ids.")],
    failed: Annotated[bool, typer.Option("--failed", help="Rerun the points whose latest run failed.")] = False,
    points: PointsOpt = None,
) -> None:
    """Rerun some points of a sweep as a new array, with the same values (the first submission's script)."""
    from slurmgen.jobs import sweep_status as st
    from slurmgen.jobs.journal import Journal, find_home
    from slurmgen.jobs.sweep_resubmit import plan_again
    from slurmgen.jobs.sweep_submit import submit_sweep
    from slurmgen.slurm.client import SlurmClient

    if failed == (points is not None):
        raise UsageError("give exactly one of --failed or --points I,J")
    record = record_for(sweep)
    if record is None:
        raise UsageError(f"{sweep!r} is not a sweep in the journal; see `slurmgen status`")
    client = SlurmClient()
    if failed:
        wanted = [r.index for r in st.point_rows(record, st.query(client, record)) if r.failed]
        if not wanted:
            err(f"no point of sweep {record.sweep_id} failed; nothing to resubmit")
            return
    else:
        assert points is not None
        try:
            wanted = sorted({int(p) for p in points.split(",") if p.strip()})
        except ValueError:
            raise UsageError(f"--points {points}: give point indexes, e.g. --points 3,7") from None
        for index in wanted:
            record.point_of(index)  # refuses an index the sweep does not have
    journal = Journal(find_home())
    sp = plan_again(record, wanted, _max_array_size(client, dry_run=False))
    done = submit_sweep(sp, client, journal, fresh=False)
    for problem in done.problems:
        err(f"warning: {problem}")
    shown = ",".join(map(str, wanted))
    err(f"resubmitted points {shown} of sweep {record.sweep_id} as array job(s) {', '.join(map(str, done.jobs))}")
    print(record.sweep_id, flush=True)
