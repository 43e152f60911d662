"""The terminal table of `slurmgen report`: goodput, then each bucket in seconds and % of the wall, then the
advice. Pure: a report in, lines out."""

from __future__ import annotations

from slurmgen.goodput import timeline as tl
from slurmgen.goodput.summary import Report, SweepReport, unknown_line

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
    tl.UNKNOWN: "progress unknown",
}


def bucket_table(
    wall: float, productive: float | None, buckets: dict[str, float], wall_label: str = "wall (first start to end)"
) -> list[str]:
    rows = [*([] if productive is None else [(tl.PRODUCTIVE, productive)]), *buckets.items()]
    out = [f"{'':24}{'seconds':>12}{'%':>8}"]
    for name, seconds in rows:
        share = seconds / wall if wall > 0 else 0.0
        out.append(f"{LABELS.get(name, name):24}{seconds:12.1f}{share:8.1%}")
    out.append(f"{wall_label:24}{wall:12.1f}{1.0 if wall > 0 else 0.0:8.1%}")
    return out


def report_lines(r: Report) -> list[str]:
    state = "running" if r.running else "ended"
    out = [f"job {r.job}: {len(r.timeline.runs)} run(s), {state}"]
    if r.progress_known:
        out.append(f"goodput {r.goodput:.1%} (productive / first start to end); {r.goodput_with_queue:.1%} counting "
                   f"the {r.queue_seconds:.0f} s wait before the first start")  # fmt: skip
    else:
        out.append(unknown_line(r))
    out += bucket_table(r.wall_seconds, r.productive_seconds if r.progress_known else None, dict(r.buckets))
    if r.redone_steps:
        how = "lost at each stop, back to the program's last save" if r.program and r.program.stops else \
            "lost at restarts and unsaved requeues"  # fmt: skip
        out.append(f"redone steps: {r.redone_steps} ({how})")
    for run in r.timeline.runs:
        wait = run.slurm_queue_seconds
        if wait is not None:
            out.append(f"run {run.run}: Slurm's queue wait {wait:.0f} s (StartTime - SubmitTime)")
    if r.program is not None:
        out += r.program.lines()
    if r.advice is not None:
        out.append("checkpoint interval:")
        out += [f"  {line}" for line in r.advice.lines()]
    elif r.advice_note is not None:
        # Young/Daly need a save's cost and a rate of real interruptions: no advice is better than one made of a
        # guess (goodput/advice_basis.py).
        out.append(r.advice_note)
    return out


SWEEP_COLUMNS = ("POINT", "VALUES", "OUTCOME", "RUNS", "REQUEUES", "RESTARTS", "WALL", "PRODUCTIVE", "GOODPUT")


UNKNOWN_CELL = "unknown"  # a productive time or goodput where no step of the program was recorded


def _made(known: bool, productive: float, goodput: float) -> tuple[str, str]:
    """The PRODUCTIVE and GOODPUT cells: the figures, or UNKNOWN_CELL where the progress is unknown."""
    return (f"{productive:.1f} s", f"{goodput:.1%}") if known else (UNKNOWN_CELL, UNKNOWN_CELL)


def sweep_rows(s: SweepReport) -> list[tuple[str, ...]]:
    """One row per point (SWEEP_COLUMNS), then the totals' row."""
    out: list[tuple[str, ...]] = []
    for (p, r), c in zip(s.points, s.each, strict=True):
        out.append((str(p), s.shown.get(p, ""), c.outcome, str(c.runs), str(c.requeues), str(c.restarts),
                    f"{r.wall_seconds:.1f} s", *_made(r.progress_known, r.productive_seconds, r.goodput)))  # fmt: skip
    counts = s.counts()
    out.append(("total", "", ", ".join(f"{n} {k}" for k, n in s.outcomes().items()), str(counts["runs"]),
                str(counts["requeues"]), str(counts["restarts"]), f"{s.wall_seconds:.1f} s",
                *_made(s.progress_known, s.productive_seconds, s.goodput)))  # fmt: skip
    return out


def sweep_unknown_line(s: SweepReport) -> str:
    """The one line that says no point's progress is known, and how to make it known."""
    return (f"sweep {s.sweep}: {len(s.points)} point(s) with a run history; their program's progress is unknown: "
            "no step of it was recorded (it does not use Preemption, and the spec has no progress.pattern to read "
            "its step from its output); no goodput can be told")  # fmt: skip


def sweep_lines(s: SweepReport) -> list[str]:
    """The roll-up: a row per point with its values, how it stands and its goodput, the totals, then the totals'
    buckets (the sums over the points: productive plus the buckets is the summed wall)."""
    out = [
        f"sweep {s.sweep}: {len(s.points)} point(s) with a run history; goodput {s.goodput:.1%} (the points' "
        f"productive over their summed wall); {s.goodput_with_queue:.1%} counting the {s.queue_seconds:.0f} s "
        "they waited before their first starts"
        if s.progress_known
        else sweep_unknown_line(s)
    ]
    grid = [SWEEP_COLUMNS, *sweep_rows(s)]
    widths = [max(len(line[k]) for line in grid) for k in range(len(SWEEP_COLUMNS))]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in grid]
    out.append("")
    productive = s.productive_seconds if s.progress_known else None
    out += bucket_table(s.wall_seconds, productive, s.buckets(), "wall (the points' sum)")
    redone = sum(r.redone_steps for _, r in s.points)
    if redone:
        out.append(f"redone steps: {redone} (lost at restarts and unsaved requeues, over every point)")
    return out
