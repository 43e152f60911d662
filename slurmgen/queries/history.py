"""`slurmgen history`: one row per run of a job, from the run history its batch shell and rank 0 wrote
(slurmgen.run_history) into `<output>/<name>-<key>/history/`. It needs no scheduler: the files outlive the job in
the queue. The same files give `slurmgen status` its save-window warning and `slurmgen doctor` the last save.

Where the files are: the journal knows `<output>` and `<name>` for jobs submitted from here; for another job,
`scontrol show job` gives its batch log (`StdOut=<output>/<name>-<key>.log`), next to that directory.
Building rows and checks is pure, given the events; reading the files is the only effect.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmgen import run_history
from slurmgen.printable import printable
from slurmgen.queries.logs import batch_logs
from slurmgen.queries.status import when
from slurmgen.slurm.showjob import JobInfo
from slurmgen.slurm.site import SitePreemption, misfits, site_preemption_from_event, window_basis
from slurmgen.submission.targets import Target

COLUMNS = ("RUN", "SLUID", "START", "END", "NODES", "EXIT", "CAUSE", "REQUEUED BY", "SAVE", "SIZE", "NOTE")
REQUEUERS = {"slurm": "Slurm", "rank0": "rank 0", "batch-shell": "batch shell", "resume": "slurmgen resume"}


def job_log_dirs(target: Target, infos: Sequence[JobInfo]) -> list[Path]:
    """The job's own log directories (`<output>/<name>-<key>/`, which hold `history/`): one, or one per array
    task. ``infos`` (scontrol's records) are needed only when the journal does not know the job."""
    return [log.with_suffix("") for log in batch_logs(target, infos)]


def last_failing(target: Target, infos: Sequence[JobInfo]) -> str | None:
    """The task that failed first in the job's last run (its batch shell's run-end event), for status and
    `submit --wait`: `rank 1 on node1 (exit 3)`; None for an array job, or when nothing failed on its own."""
    dirs = job_log_dirs(target, infos)
    if len(dirs) != 1:
        return None
    runs = run_history.History.load(str(dirs[0])).runs()
    failing = runs[-1].failing if runs else None
    return printable(failing) if failing else None  # the run history holds what the program printed


def step_restarts(target: Target, infos: Sequence[JobInfo]) -> int | None:
    """How often the job's step was restarted inside its allocation, over all its runs (the run history's restart
    events), for status; None for an array job or without a run history."""
    dirs = job_log_dirs(target, infos)
    if len(dirs) != 1:
        return None
    history = run_history.History.load(str(dirs[0]))
    return history.step_restarts() if history.events else None


def no_history(target: Target, log_dirs: Sequence[Path], slurm_knows: bool) -> str:
    """Why there is nothing to show, in one line."""
    if not log_dirs:
        if target.entry is None and not slurm_knows:
            return (f"job {target.label}: neither the journal here nor Slurm knows it; run slurmgen history in the "
                    "directory you submitted it from")  # fmt: skip
        return f"job {target.label}: Slurm gives no absolute log path for it, so its run history cannot be found"
    where = ", ".join(f"{run_history.history_dir(str(d))}/" for d in log_dirs)
    return (f"job {target.label}: no run history (looked in {where}); a job records its runs once its first run has "
            "started, if it was submitted by slurmgen")  # fmt: skip


# --- what the events say -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowMiss:
    """A save that, with one step before it, took longer than the window Slurm gives a stop."""

    cause: str  # the window's cause: preemption or time-limit
    need: float  # seconds: the save plus a step
    window: float
    basis: str  # what the window is made of, e.g. "GraceTime 30 s + KillWait 30 s"


def window_miss(
    plan: SitePreemption | None, save: float | None, step: float | None, cause: str | None
) -> WindowMiss | None:
    """The window a save did not fit: the one of its cause when it has one (a save for a preemption must fit the
    preemption's window), else the tightest it would miss (a periodic save says how the next stop will go)."""
    if plan is None or save is None:
        return None
    missed = misfits(plan, save, step)
    if cause in plan.windows:
        missed = [m for m in missed if m[0] == cause]
    if not missed:
        return None
    which, window = missed[0]
    return WindowMiss(which, save + (step or 0.0), window, window_basis(plan, which))


def sites(events: Iterable[Mapping[str, Any]]) -> dict[int, SitePreemption]:
    """The site plan each run recorded at its start (`site` in run-start), by run."""
    found = {}
    for e in run_history.History(events).all(run_history.RUN_START):
        if (plan := site_preemption_from_event(e.get("site"))) is not None:
            found[int(e["run"])] = plan
    return found


def save_causes(events: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """The cause of the last save of each run."""
    saves = run_history.History(events).all(run_history.SAVE)
    return {int(e["run"]): str(e["cause"]) for e in saves if e.get("cause")}


@dataclass(frozen=True)
class LastSave:
    """The latest save of a job, and what the site will give the next stop."""

    key: str  # the job's key: <id> or <array>_<task>
    run: int
    seconds: float
    size: int | None  # bytes
    step_seconds: float | None
    miss: WindowMiss | None  # against the site of the job's latest run


def last_save(key: str, history: run_history.History) -> LastSave | None:
    saved = history.last_save()
    if saved is None or saved.save_seconds is None:
        return None
    events = history.events
    plans = sites(events)
    plan = plans[max(plans)] if plans else None
    seconds, step = float(saved.save_seconds), saved.step_seconds
    miss = window_miss(plan, seconds, step, save_causes(events).get(saved.run))
    return LastSave(key, saved.run, seconds, saved.save_bytes, step, miss)


def read_last_save(log_dir: Path, key: str) -> LastSave | None:
    return last_save(key, run_history.History.load(str(log_dir)))


def window_warnings(targets: Iterable[Target]) -> list[str]:
    """`slurmgen status`: one line per job whose last save plus a step does not fit its window. Only jobs the
    journal knows (their files are found without asking Slurm)."""
    lines = []
    for key, log_dir in _known_log_dirs(targets):
        found = read_last_save(log_dir, key)
        if found is not None and found.miss is not None:
            lines.append(window_warning(found))
    return lines


def _known_log_dirs(targets: Iterable[Target]) -> Iterator[tuple[str, Path]]:
    """(job key, log directory) of each run directory of the jobs the journal knows (found without Slurm)."""
    for target in targets:
        if target.entry is None or not target.entry.log_dir:
            continue
        for log_dir in job_log_dirs(target, []):
            yield log_dir.name.removeprefix(f"{target.entry.name}-"), log_dir


def restart_lines(targets: Iterable[Target]) -> list[str]:
    """`slurmgen status`: one line per restart of the step inside the allocation (cause, rank, node, time lost), per
    excluded node and per stop that preemption.handler auto made for a program without Preemption, for the jobs
    the journal knows; `slurmgen history JOB` shows them per run."""
    lines = []
    for key, log_dir in _known_log_dirs(targets):
        for run in run_history.History.load(str(log_dir)).runs():
            lines += [f"job {key}: run {run.run}, restart {n} inside the allocation ({text})"
                      for n, text in enumerate(run.restarts, 1)]  # fmt: skip
            if run.repeated is not None:
                lines.append(f"job {key}: run {run.run}: the same failure repeated ({run.repeated}): not restarted")
            lines += [f"job {key}: run {run.run}, node excluded ({text})" for text in run.excluded]
            if run.fallback is not None:
                lines.append(f"job {key}: run {run.run}: {run.fallback}")
            lines += [f"job {key}: warning: {text}" for text in run.checkpoint_ignored]
    return lines


def window_warning(found: LastSave) -> str:
    miss = found.miss
    assert miss is not None
    step = f" plus a step of {found.step_seconds:.1f} s" if found.step_seconds else ""
    return (
        f"warning: job {found.key}: its last save took {found.seconds:.1f} s{step} (run {found.run}), more than "
        f"the {miss.window:g} s {miss.cause} window ({miss.basis}): it would be killed mid-save; "
        "see slurmgen doctor"
    )


# --- the table ------------------------------------------------------------------------------------------------


def size_text(size: int | None) -> str:
    if size is None:
        return ""
    value, unit = float(size), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"


# How a run that kept its state ended (run-end's `ended`, slurmgen/interruption/), as a note.
ENDINGS = {
    "stopped": "stopped before its work was done: state kept (slurmgen resume)",
    "unsure": "state kept: Slurm could not be asked whether it was requeued",
}


def _note(run: run_history.Run, miss: WindowMiss | None) -> str:
    notes = []
    if run.steps_done:
        # Spec field steps: the steps this run completed, 1-based as the batch log says them ("step 2 of 3").
        of = f" of {run.steps}" if run.steps else ""
        notes.append(
            f"step{'s' if len(run.steps_done) > 1 else ''} {', '.join(str(i + 1) for i in run.steps_done)}{of} done"
        )
    if miss is not None:
        notes.append(f"! save+step {miss.need:.1f} s > {miss.window:g} s {miss.cause} window ({miss.basis})")
    if run.ended in ENDINGS:
        notes.append(ENDINGS[run.ended])
    if run.fallback is not None:
        notes.append(run.fallback)
    if run.refused:
        notes.append(f"requeue refused: {run.refused}")
    for number, restart in enumerate(run.restarts, 1):
        notes.append(f"restart {number} ({restart})")
    if run.repeated is not None:
        notes.append(f"the same failure repeated ({run.repeated}): not restarted")
    notes += [f"! {text}" for text in run.checkpoint_ignored]
    notes += [f"node excluded ({text})" for text in run.excluded]
    if run.failing:
        notes.append(run.failing)
    if run.continued_as is not None:
        notes.append(f"continued in job {run.continued_as} (slurmgen history {run.continued_as})")
    return "; ".join(notes)


def rows(events: Sequence[Mapping[str, Any]], now: float | None = None) -> list[tuple[str, ...]]:
    """One row of cells (COLUMNS) per run."""
    now = time.time() if now is None else now
    plans, causes = sites(events), save_causes(events)
    out: list[tuple[str, ...]] = []
    for run in run_history.runs(events):
        cause = run.cause or ""
        if run.cause == run_history.PREEMPTION and run.mode:
            cause += f" ({run.mode})"
        seconds = None if run.save_seconds is None else float(run.save_seconds)
        miss = window_miss(plans.get(run.run), seconds, run.step_seconds, causes.get(run.run))
        out.append((
            str(run.run),
            printable(run.sluid or ""),
            "" if run.start is None else when(float(run.start), now),
            "" if run.end is None else when(float(run.end), now),
            printable(run.nodes or ""),
            "" if run.exit_code is None else str(run.exit_code),
            printable(cause),
            REQUEUERS.get(run.requeued_by or "", run.requeued_by or ""),
            "" if seconds is None else f"{seconds:.1f} s" + (f" ({run.saves} saves)" if run.saves > 1 else ""),
            size_text(run.save_bytes),
            printable(_note(run, miss)),
        ))  # fmt: skip
    return out


def table(cells: Sequence[tuple[str, ...]]) -> str:
    """Left-aligned columns; columns empty in every row are left out (RUN always stays)."""
    keep = [i for i in range(len(COLUMNS)) if i == 0 or any(row[i] for row in cells)]
    grid = [tuple(COLUMNS[i] for i in keep), *(tuple(row[i] for i in keep) for row in cells)]
    widths = [max(len(line[k]) for line in grid) for k in range(len(keep))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in grid)


SWEEP_COLUMNS = ("POINT", "VALUES")


def sweep_table(points: Sequence[tuple[int, str, Sequence[Mapping[str, Any]]]], now: float | None = None) -> str:
    """`history SWEEP`: every point's runs in one table, each row led by its point and the point's values; the
    columns as one job's table (empty ones left out)."""
    cells = [(str(index), printable(values), *row) for index, values, events in points for row in rows(events, now)]
    keep = [i for i in range(len(COLUMNS) + 2) if i < 3 or any(row[i] for row in cells)]
    names = (*SWEEP_COLUMNS, *COLUMNS)
    grid = [tuple(names[i] for i in keep), *(tuple(row[i] for i in keep) for row in cells)]
    widths = [max(len(line[k]) for line in grid) for k in range(len(keep))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in grid)
