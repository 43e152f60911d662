"""A job's goodput as the job interface hands it out (`slurmgen report`, the live part of `slurmgen status`,
`Job.report()`, `Sweep.report()`, `slurmgen doctor JOB`): every kind of job builds one `Goodput` from its run
histories, so the CLI and the API never ask which kind a job is. The numbers are slurmgen.goodput's; the files
are found by slurmgen.queries.goodput_files.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurmgen.goodput.summary import Report, SweepReport
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.submission.sweep_record import SweepRecord
    from slurmgen.submission.targets import Target


@dataclass(frozen=True)
class Goodput:
    """`data`: what `--json` prints (docs: goodput); `lines`: the terminal table; `page()`: the offline timeline
    page (`--html`); `advice()`: the checkpoint-interval advice, one block per job or task (`doctor JOB`). The
    page and the advice are made on demand: a sweep's roll-up leaves its points' markers and advice out."""

    data: dict[str, Any]
    lines: tuple[str, ...]
    page: Callable[[], str]
    advice: Callable[[], tuple[str, ...]]


def of_jobs(reports: Sequence[Report]) -> Goodput:
    """One job's reports (an array job: one per task)."""
    from slurmgen.goodput import html, text
    from slurmgen.queries.goodput_files import reports_json

    found = list(reports)
    lines = "\n\n".join("\n".join(text.report_lines(r)) for r in found).splitlines()
    advice: list[str] = []
    for r in found:
        advice.append(f"job {r.job}: checkpoint interval")
        if r.advice is None and r.advice_note is not None:
            advice.append(f"  {r.advice_note}")
        elif r.advice is None:
            advice.append("  no save measured yet: the advice needs at least one save (Preemption.save)")
        else:
            advice += [f"  {line}" for line in r.advice.lines()]
    return Goodput(reports_json(found), tuple(lines), lambda: html.job_page(found), lambda: tuple(advice))


def of_sweep(sweep: SweepReport, detailed: Callable[[], SweepReport]) -> Goodput:
    """A sweep's roll-up (`sweep`: its points' reports without markers and advice) and, on demand, the page and
    the advice from `detailed()` (every point's whole report, read again)."""
    from slurmgen.goodput import html, text

    def advice() -> tuple[str, ...]:
        points = detailed().points
        return tuple(f"point {point}: {line}" for point, r in points if r.advice for line in r.advice.lines())

    return Goodput(sweep.to_json(), tuple(text.sweep_lines(sweep)), lambda: html.sweep_page(detailed()), advice)


def job_goodput(target: Target, client: SlurmClient | None) -> Goodput:
    from slurmgen.queries.goodput_files import job_report

    return of_jobs(job_report(target, client))


def sweep_goodput(record: SweepRecord) -> Goodput:
    from slurmgen.queries.goodput_files import sweep_report

    return of_sweep(sweep_report(record, detail=False), lambda: sweep_report(record))


def live_lines(target: Target, client: SlurmClient | None) -> tuple[str, ...]:
    """The job's progress under its status table: step, rate, last save, goodput, ETA (slurmgen/goodput/live.py);
    nothing for a job whose rank 0 has not sampled a step yet. A bar on a terminal, plain lines otherwise."""
    from slurmgen.goodput.live import lines, live
    from slurmgen.queries.goodput_files import histories

    found = histories(target, client)
    out: list[str] = []
    for h in found:
        view = live(h.events, time.time())
        if view is not None:
            head = [f"==> {h.key} <=="] if len(found) > 1 else []
            out += head + lines(view, sys.stdout.isatty(), shutil.get_terminal_size().columns)
    return tuple(out)


def sweep_rollup_line(record: SweepRecord) -> tuple[str, ...]:
    """The sweep's goodput so far, under its status table (slurmgen report SWEEP has the whole roll-up)."""
    from slurmgen.queries.goodput_files import sweep_report

    return rollup_line(sweep_report(record, detail=False).to_json())


def rollup_line(roll: dict[str, Any]) -> tuple[str, ...]:
    """The one line of a sweep roll-up's JSON (SweepReport.to_json): its goodput, or why there is none."""
    if not roll["points"]:
        return ()
    over = f"over {len(roll['points'])} point(s) with a run history"
    if not roll["progress_known"]:  # no point recorded a step: a 0% would blame the job for what was never measured
        return (f"goodput so far: unknown, no training step recorded {over} (the program does not use Preemption, "
                "and the spec has no progress.pattern to read its step from its output)",)  # fmt: skip
    return (f"goodput so far: {roll['goodput']:.1%} {over}",)
