"""The terminal table of `slurmgen report`: goodput, then each bucket in seconds and % of the wall, then the
advice. Pure: a report in, lines out."""

from __future__ import annotations

from slurmgen.goodput import timeline as tl
from slurmgen.goodput.summary import Report, SweepReport

LABELS = {
    tl.PRODUCTIVE: "productive (training)",
    tl.QUEUE: "queue between runs",
    tl.STARTUP: "start-up to first step",
    tl.SAVE: "save (blocking)",
    tl.RESTORE: "restore",
    tl.REDONE: "redone steps",
    tl.RECOVERY: "recovery gap",
    tl.HANG: "hang wait",
    tl.OTHER: "other",
}


UNTIMED = (
    "checkpoint interval: not advised: no save of the program was timed (a glob of checkpoint.path that matches "
    "its temporary file too, e.g. out/ckpt.pt*, times each save by its rename)"
)


def bucket_table(wall: float, productive: float, buckets: dict[str, float]) -> list[str]:
    rows = [(tl.PRODUCTIVE, productive), *buckets.items()]
    out = [f"{'':24}{'seconds':>12}{'%':>8}"]
    for name, seconds in rows:
        share = seconds / wall if wall > 0 else 0.0
        out.append(f"{LABELS.get(name, name):24}{seconds:12.1f}{share:8.1%}")
    out.append(f"{'wall (first start to end)':24}{wall:12.1f}{1.0 if wall > 0 else 0.0:8.1%}")
    return out


def report_lines(r: Report) -> list[str]:
    state = "running" if r.running else "ended"
    out = [
        f"job {r.job}: {len(r.timeline.runs)} run(s), {state}",
        f"goodput {r.goodput:.1%} (productive / first start to end); {r.goodput_with_queue:.1%} counting the "
        f"{r.queue_seconds:.0f} s wait before the first start",
    ]
    out += bucket_table(r.wall_seconds, r.productive_seconds, dict(r.buckets))
    if r.redone_steps:
        out.append(f"redone steps: {r.redone_steps} (lost at restarts, as recorded)")
    for run in r.timeline.runs:
        wait = run.slurm_queue_seconds
        if wait is not None:
            out.append(f"run {run.run}: Slurm's queue wait {wait:.0f} s (StartTime - SubmitTime)")
    if r.program is not None:
        out += r.program.lines()
    if r.advice is not None:
        out.append("checkpoint interval:")
        out += [f"  {line}" for line in r.advice.lines()]
    elif r.program is not None and r.program.saves:
        # Young/Daly need a save's cost: a save seen only once done gives none, and no advice is better than one
        # made of a guess.
        out.append(UNTIMED)
    return out


def sweep_lines(s: SweepReport) -> list[str]:
    wall, productive = s.wall_seconds, s.productive_seconds
    share = productive / wall if wall > 0 else 0.0
    out = [f"sweep {s.sweep}: {len(s.points)} point(s) with a run history; goodput {share:.1%}"]
    out += bucket_table(wall, productive, s.buckets())
    out += [f"point {p}: goodput {r.goodput:.1%} over {r.wall_seconds:.0f} s" for p, r in s.points]
    return out
