"""Local jobs as the job commands see them: `local-<n>` ids (slurmgen.slurm.ids), their journal, whether their runner
still runs, their status row, and requests to a running one (a signal for its batch shell, a cancel).

A local job's records live in `.slurmgen/local/journal.jsonl`, apart from the submission journal: one "local" event
when a run of the runner starts (state RUNNING) and one when it ends (its end state). Its control directory
`.slurmgen/local/<n>/` holds `runner.json` while a runner runs it, and the request files the runner picks up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.atomic import write_text
from slurmgen.errors import UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.local import jobenv, procs
from slurmgen.queries.status import Row, when
from slurmgen.slurm.ids import local_label
from slurmgen.submission.targets import LOCAL_KEY

if TYPE_CHECKING:
    from slurmgen.local.setup import Paths

LOCAL_DIR = "local"  # under .slurmgen (or $SLURMGEN_HOME): the local journal, the id counter, the control dirs
RUNNER_FILE = "runner.json"
SIGNAL_REQUEST = "signal"  # `slurmgen run --job ID --signal SIG`, `slurmgen cancel --signal SIG local-<n>`
CANCEL_REQUEST = "cancel"  # `slurmgen cancel local-<n>`: end the job as scancel does
POLL = 0.05
# What a local array task's "local" events add (slurmgen.local.array): its key `<array>_<task>`, and for a point of a
# sweep the sweep's id, the point's index, its values as `slurmgen status SWEEP` shows them, and as a dict.
KEY_EXTRA = LOCAL_KEY
SWEEP_EXTRA = "sweep"
POINT_EXTRA = "point"
VALUES_EXTRA = "values"
PARAMS_EXTRA = "params"


@dataclass(frozen=True)
class LocalRecord:
    job_id: str  # the number: "2"
    entry: Entry  # its latest event, with `time` set to the start of its latest runner (the "most recent" rule)
    state: str  # RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT; UNKNOWN when its runner died unrecorded
    runs: int
    runner: int | None  # the live runner's pid
    ended: float | None = None  # when its latest runner recorded its end state; None while it runs (or unrecorded)

    def elapsed(self, now: float) -> float | None:
        """The time of its latest runner, as Slurm's ELAPSED counts a run: from its start to its end (now, while it
        runs); None when its runner died without recording an end."""
        if self.state == "RUNNING":
            return max(now - self.entry.time, 0.0)
        return None if self.ended is None else max(self.ended - self.entry.time, 0.0)

    @property
    def key(self) -> str:
        """How the job is named: its number, or `<array>_<task>` for an array task (as Slurm names one)."""
        key = self.entry.extra.get(KEY_EXTRA)
        return key if isinstance(key, str) and key else self.job_id

    @property
    def label(self) -> str:
        return local_label(self.key)

    @property
    def control(self) -> Path:
        return Path(self.entry.run_dir)


def journal(base: Path) -> Journal:
    return Journal(base / LOCAL_DIR)


def live_runner(control: Path) -> int | None:
    """The pid of the runner of the local job in `control`, while it runs: its runner.json names a live process that
    started when the runner did (a pid reused since by another process is not taken for it)."""
    try:
        info = json.loads((control / RUNNER_FILE).read_text(encoding="utf-8"))
        runner = int(info["runner_pid"])
        started = info.get("runner_start")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    now = procs.start_time(runner)
    if now is None or (started is not None and now != started):
        return None
    return runner


def _run_of(control: Path) -> int:
    try:
        return int(json.loads((control / RUNNER_FILE).read_text(encoding="utf-8"))["run"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def records(base: Path) -> list[LocalRecord]:
    """Every local job recorded under `base`, by the start of its latest runner, oldest first."""
    latest: dict[str, Entry] = {}
    begun: dict[str, Entry] = {}  # the latest runner's start: when, how it was run (options), its nodes
    for entry in journal(base).entries():
        if entry.event != "local" or not entry.job_id:
            continue
        latest[entry.job_id] = entry
        if entry.extra.get("state") == "RUNNING":
            begun[entry.job_id] = entry
    found = []
    for job_id, entry in latest.items():
        state = str(entry.extra.get("state") or "UNKNOWN")
        runner = live_runner(Path(entry.run_dir)) if state == "RUNNING" else None
        runs = _run_of(Path(entry.run_dir)) if runner is not None else int(entry.extra.get("runs") or 0)
        if state == "RUNNING" and runner is None:
            state = "UNKNOWN"  # the runner was killed before it could record the end
        start = begun.get(job_id, entry)
        ended = entry.time if entry is not start and state not in ("RUNNING", "UNKNOWN") else None
        entry = replace(entry, time=start.time, extra={**start.extra, **entry.extra})
        found.append(LocalRecord(job_id, entry, state, runs, runner, ended))
    return sorted(found, key=lambda r: r.entry.time)


def find(base: Path, job_id: str) -> LocalRecord:
    """The local job of a number (`3`) or an array task's key (`3_1`)."""
    for record in records(base):
        if job_id in (record.job_id, record.key):
            return record
    raise UsageError(
        f"no local job {local_label(job_id)} in {journal(base).path}; run `slurmgen status` in the directory you "
        "ran it from"
    )


def row(record: LocalRecord, now: float, step_restarts: int | None = None) -> Row:
    """The job's line in `slurmgen status`: its id says that it ran here (`local-<n>`); ``step_restarts``: the
    step's restarts inside the allocation, from its run history (queries/history.py step_restarts)."""
    entry = record.entry
    reasons = {"UNKNOWN": "its runner ended without recording the end (killed?)"}
    code = entry.extra.get("exit_code")
    nodes = entry.extra.get("nodes")
    return Row(
        job=record.label,
        name=entry.name,
        state=record.state,
        reason=reasons.get(record.state, ""),
        restarts=str(max(record.runs - 1, 0)) if record.runs else "",
        step_restarts="" if step_restarts is None else str(step_restarts),
        nodes=jobenv.nodelist(nodes) if isinstance(nodes, int) and nodes > 0 else "",
        exit="" if record.state in ("RUNNING", "UNKNOWN") or code is None else str(code),
        submitted=when(entry.time, now),
    )


def request(
    control: Path, name: str, text: str, clock: Callable[[], float] = time.monotonic, timeout: float = 3.0
) -> int:
    """Leave a request for the runner of the local job in `control` and wait until it has taken it; its pid."""
    runner = live_runner(control)
    if runner is None:
        raise UsageError(f"local job {local_label(control.name)} is not running ({control} has no live runner)")
    path = control / name
    write_text(path, text + "\n")
    deadline = clock() + timeout
    while path.exists():
        if live_runner(control) is None:
            path.unlink(missing_ok=True)
            raise UsageError(f"local job {local_label(control.name)} ended before its runner took the request")
        if clock() > deadline:
            path.unlink(missing_ok=True)
            raise UsageError(f"the runner (pid {runner}) did not take the request within {timeout:g} s")
        time.sleep(POLL)
    return runner


def send_signal(control: Path, sig: str) -> int:
    """Ask the runner of a local job to deliver `sig` to its batch shell (SIGCONT first); the runner's pid."""
    return request(control, SIGNAL_REQUEST, sig)


def cancel(control: Path) -> int:
    """Ask the runner to end the job as scancel does (SIGTERM to every process, SIGKILL after KillWait)."""
    return request(control, CANCEL_REQUEST, "cancel")


def wait_ended(control: Path, timeout: float, clock: Callable[[], float] = time.monotonic) -> bool:
    """Wait until no runner runs the job; whether it ended within `timeout` seconds."""
    deadline = clock() + timeout
    while live_runner(control) is not None:
        if clock() > deadline:
            return False
        time.sleep(POLL * 4)
    return True


def leftover_group(control: Path) -> int | None:
    """The process group of the job's last batch shell while any process of it still runs (its runner was killed
    and left them), else None."""
    try:
        batch = int(json.loads((control / RUNNER_FILE).read_text(encoding="utf-8"))["batch_pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return batch if procs.group_members(batch) else None


def recorder(journal: Journal, source: Path, name: str, paths: Paths, job_id: str) -> Callable[..., None]:
    """A function that records a local job's state in the local journal (the job commands find it there); a local
    array task records itself the same way, under its own id."""

    def record(state: str, **extra: object) -> None:
        journal.append(
            Entry(
                event="local",
                token=f"local-{job_id}",
                name=name,
                spec=str(Path(source).resolve()),
                run_dir=str(paths.control),
                script=str(paths.script),
                time=time.time(),
                job_id=job_id,
                cluster=jobenv.CLUSTER_NAME,
                log_dir=str(paths.batch_log.parent),
                extra={"state": state, **extra},
            )
        )

    return record
