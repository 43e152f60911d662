"""The record of a job's runs: who started each run, what stopped it, what it saved, who requeued it.

Written while the job runs by the batch shell (`slurmgen.batch`) and by rank 0 (`Preemption`), read by
the runtime (the requeue budgets, the save window) and by `slurmgen history` and `slurmgen status` after the job
has left the queue. Standard library only: the in-task runtime writes it.

Where: one directory per job, `<log dir>/history/` (the per-job log directory the script creates, so it exists
whether preemption handling is on or off), one JSON-lines file per writer (`batch-shell.jsonl`, `rank0.jsonl`, and
`task-<rank>.jsonl` for a task whose program failed on its own): two writers on two nodes never append to the same
file, which a shared filesystem such as NFS does not order.
Each event is one `write(2)` of one line on an O_APPEND descriptor.

Every event has `v` (format), `event`, `run` (1 for the first run; Slurm's SLURM_RESTART_COUNT + 1), `time`
(epoch seconds) and `by` (`batch-shell`, `rank0`, or `slurm` for what the batch shell found Slurm had done).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

FORMAT = 1
DIR_NAME = "history"

# Events
RUN_START = "run-start"  # batch shell: nodes, host, partition, site (what Slurm will do on preemption)
SIGNAL = "signal"  # batch shell: a signal reached it (sig)
PREEMPTED = "preempted"  # batch shell or rank 0: Slurm is preempting this run (mode, preempt_time, end_time)
STOP = "stop"  # rank 0: the ranks agreed to stop (cause, actions, signals, step_seconds)
SAVE = "save"  # rank 0: a state is durable (seconds, bytes, cause, kind)
SAVE_FAILED = "save-failed"  # rank 0: a save failed, the previous state stays (error: one line, background)
REQUEUE = "requeue"  # whoever requeued the job, or the batch shell on finding that Slurm did (cause, mode)
REFUSED = "requeue-refused"  # a requeue that was wanted but not made (why: budget, disabled, ...)
RUN_END = "run-end"  # batch shell: the job's exit code, the step's (srun's), the task that failed first if any,
#                      and how it ended (slurmgen/interruption.py: completed, stopped, requeued, failed, unsure)
TASK_EXIT = "task-exit"  # a task's supervisor: its program failed on its own (rank, node, exit_code, signal, log)
HANDLER = "preemption-handler"  # rank 0: the program constructed Preemption (handler: runtime); `auto` reads it
STATE_REMOVED = "state-removed"  # batch shell: the job completed; its resume state is gone (path)
RESTART = "restart"  # batch shell: the step is started again inside the allocation (cause, rank, node, error, ...)
HANG = "hang"  # a task's supervisor: no rank progressed for recovery.hang_timeout (rank, node, progressed, stacks)
REPEATED = "repeated-failure"  # batch shell: the step failed again the same way; not restarted nor requeued
FINISHED = "finished"  # rank 0: the program reached its end with no stop agreed (Preemption, at exit)

# Causes. A preemption is the scheduler's decision, not the job's fault: it has a budget of its own
# (preemption.max_preemptions), apart from the requeues the job asks for itself (preemption.max_requeues).
PREEMPTION = "preemption"
TIME_LIMIT = "time-limit"
FAILURE = "failure"
REQUESTED = "requested"  # the program asked (Preemption.request("requeue"))
EXTERNAL = "external"  # requeued by someone else (scontrol requeue by a user or admin, a node failure)
OWN_CAUSES = frozenset({TIME_LIMIT, FAILURE, REQUESTED})


def history_dir(log_dir: str) -> str:
    return os.path.join(log_dir, DIR_NAME)


def append(log_dir: str, writer: str, event: str, run: int, time: float, **fields: Any) -> None:
    """Append one event to ``writer``'s file. Best effort is not enough here: errors propagate."""
    directory = history_dir(log_dir)
    os.makedirs(directory, exist_ok=True)
    record = {"v": FORMAT, "event": event, "run": run, "time": round(time, 3), "by": writer, **fields}
    line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
    fd = os.open(os.path.join(directory, f"{writer}.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read(log_dir: str) -> list[dict[str, Any]]:
    """Every event of every writer, in time order; torn or foreign lines are skipped."""
    directory = history_dir(log_dir)
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".jsonl"))
    except OSError:
        return []
    events: list[dict[str, Any]] = []
    for name in names:
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("run"), int) and "event" in record:
                events.append(record)
    events.sort(key=lambda e: (e["run"], float(e.get("time", 0))))
    return events


@dataclass
class Run:
    """One run of a job, summarised from its events."""

    run: int
    start: float | None = None
    end: float | None = None
    nodes: str | None = None
    exit_code: int | None = None
    cause: str | None = None  # why it stopped: preemption, time-limit, failure, terminated, ... (None: it ran out)
    mode: str | None = None  # Slurm's PreemptMode when preempted
    requeued_by: str | None = None  # rank0, batch-shell, slurm
    refused: str | None = None  # why a wanted requeue was not made
    save_seconds: float | None = None  # the last save of the run
    save_bytes: int | None = None
    saves: int = 0
    step_seconds: float | None = None
    signals: list[str] = field(default_factory=list)
    failing: str | None = None  # "rank 3 on node2 (exit 1)"
    ended: str | None = None  # how the run ended (slurmgen/interruption.py: completed, stopped, requeued, ...)
    # The step's restarts inside the allocation (batch/restart.py): "crash: rank 1 on n2 (killed by SIGKILL),
    # 12.5 s lost", one per restart; and a failure that repeated and ended the run.
    restarts: list[str] = field(default_factory=list)
    repeated: str | None = None


def runs(events: Iterable[Mapping[str, Any]]) -> list[Run]:
    """One summary per run, in run order."""
    by_run: dict[int, Run] = {}
    for e in events:
        r = by_run.setdefault(int(e["run"]), Run(int(e["run"])))
        kind, when = e.get("event"), e.get("time")
        if kind == RUN_START:
            r.start, r.nodes = when, e.get("nodes")
        elif kind == RUN_END:
            r.end, r.exit_code, r.failing, r.ended = when, e.get("exit_code"), e.get("failing"), e.get("ended")
        elif kind == SIGNAL:
            r.signals.append(str(e.get("sig")))
        elif kind == PREEMPTED:
            # An observation only: the mode is known once someone requeues (or Slurm did, which is REQUEUE).
            r.cause = PREEMPTION
        elif kind == STOP:
            if r.cause != PREEMPTION:
                r.cause = e.get("cause")
            r.step_seconds = e.get("step_seconds", r.step_seconds)
        elif kind == SAVE:
            r.save_seconds, r.save_bytes, r.saves = e.get("seconds"), e.get("bytes"), r.saves + 1
        elif kind == REQUEUE:
            if r.requeued_by is None:  # the first one recorded is the requeue that happened
                r.requeued_by = e.get("by")
                r.cause = e.get("cause") or r.cause
                r.mode = e.get("mode") or r.mode
        elif kind == REFUSED:
            r.refused = e.get("why")
        elif kind == RESTART:
            lost = e.get("lost_seconds")
            r.restarts.append(f"{e.get('cause')}: {e.get('who')}" + (f", {lost:g} s lost" if lost is not None else ""))
        elif kind == REPEATED:
            r.repeated = str(e.get("error") or "")
    return [by_run[n] for n in sorted(by_run)]


@dataclass(frozen=True)
class Counts:
    own: int  # requeues the job caused itself (time limit, failure, its own request): preemption.max_requeues
    preemptions: int  # requeues after a preemption: preemption.max_preemptions
    external: int  # requeues by someone else (not counted against either budget)


def counts(history: Iterable[Run]) -> Counts:
    own = preempt = other = 0
    for r in history:
        if r.requeued_by is None:
            continue
        if r.cause == PREEMPTION:
            preempt += 1
        elif r.cause in OWN_CAUSES:
            own += 1
        else:
            other += 1
    return Counts(own, preempt, other)


def site_of(events: Iterable[Mapping[str, Any]], run: int) -> Mapping[str, Any]:
    """What the site does on preemption, recorded at the start of ``run`` (the batch shell asks Slurm once per
    run; slurm/site.py plan_record): mode, grace, version, ...; empty when nothing was recorded."""
    for e in events:
        if e.get("event") == RUN_START and e.get("run") == run and isinstance(e.get("site"), Mapping):
            return dict(e["site"])
    return {}


def site_mode(events: Iterable[Mapping[str, Any]], run: int) -> str | None:
    """The PreemptMode recorded at the start of ``run``, if any."""
    mode = site_of(events, run).get("mode")
    return str(mode) if mode else None


def slurm_requeues_in_grace(site: Mapping[str, Any]) -> bool:
    """Does Slurm itself requeue a job of this site that ends during its preemption grace time? Since 24.05
    (SchedMD commit a689104d15, bug 16263: src/slurmctld/proc_req.c) a batch job that completes after the grace
    time's signal, in a PreemptMode=REQUEUE partition, is treated as preempted and requeued. Before, such a job
    just completed, and slurmgen had to requeue it. A requeue of our own during the grace would now be one too
    many: `scontrol requeue` leaves Slurm's grace mark on the job (only a completion clears it), so the next
    run, ending, is requeued once more (seen on 24.11: a completed job ran a third time from scratch)."""
    from slurmgen.slurm.site_config import version_tuple

    known = version_tuple(site.get("version"))
    return site.get("mode") == "REQUEUE" and known is not None and known >= (24, 5)


def slurm_requeue_cause(preempt_time_seen: bool, mode: str | None) -> str:
    """Why Slurm requeued a job that did not ask. While Slurm requeues a preempted job its record no longer shows
    PreemptTime (src/scontrol/info_job.c prints it only while preemptable_time is set), so a requeue of a job in a
    PreemptMode=REQUEUE partition is taken for a preemption; anywhere else it is someone else's doing (an admin's
    scontrol requeue, a node failure)."""
    return PREEMPTION if preempt_time_seen or mode == "REQUEUE" else EXTERNAL


def last_save(history: Iterable[Run]) -> Run | None:
    """The latest run that saved, for the save-window check."""
    saved = [r for r in history if r.save_seconds is not None]
    return saved[-1] if saved else None
