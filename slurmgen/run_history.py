"""The record of a job's runs: who started each run, what stopped it, what it saved, who requeued it.

Written while the job runs by the batch shell (`slurmgen.batch`) and by rank 0 (`Preemption`), read by
the runtime (the requeue budgets, the save window) and by `slurmgen history` and `slurmgen status` after the job
has left the queue. Standard library only: the in-task runtime writes it.

Where: one directory per job, `<log dir>/history/` (the per-job log directory the script creates, so it exists
whether preemption handling is on or off), one JSON-lines file per writer (`batch-shell.jsonl`, `rank0.jsonl`, and
`task-<rank>.jsonl` for a task whose program failed on its own, `node-<node>.jsonl` for the hang watchdog's events
of that node's ranks): two writers on two nodes never append to the same file, which a shared filesystem such as
NFS does not order (appends from one node go through one kernel, which orders them).
Each event is one `write(2)` of one line on an O_APPEND descriptor.

Every event has `v` (format), `event`, `run` (1 for the first run; Slurm's SLURM_RESTART_COUNT + 1), `time`
(epoch seconds) and `by` (`batch-shell`, `rank0`, or `slurm` for what the batch shell found Slurm had done).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slurmgen import trust
from slurmgen.printable import printable

FORMAT = 1
DIR_NAME = "history"

# Events
RUN_START = "run-start"  # batch shell: nodes, host, partition, site (what Slurm will do on preemption), sluid
SIGNAL = "signal"  # batch shell: a signal reached it (sig)
PREEMPTED = "preempted"  # batch shell or rank 0: Slurm is preempting this run (mode, preempt_time, end_time)
STOP = "stop"  # rank 0: the ranks agreed to stop (cause, actions, signals, step_seconds); batch shell: its own stop
#                (cause, actions, signals, and `fallback` when preemption.handler auto waited for the program in vain)
SAVE = "save"  # rank 0: a state is durable (seconds, bytes, cause, kind)
SAVE_FAILED = "save-failed"  # rank 0: a save failed, the previous state stays (error: one line, background)
REQUEUE = "requeue"  # whoever requeued the job, or the batch shell on finding that Slurm did (cause, mode)
REFUSED = "requeue-refused"  # a requeue that was wanted but not made (why: budget, disabled, ...)
RUN_END = "run-end"  # batch shell: the job's exit code, the step's (srun's), the task that failed first if any,
#                      and how it ended (slurmgen/interruption/: completed, stopped, requeued, failed, unsure)
TASK_EXIT = "task-exit"  # a task's supervisor: its program failed on its own (rank, node, exit_code, signal, log)
RAISED = "raised"  # a task's supervisor: its program raised an uncaught exception (rank, node, raised, raised_at),
#                    recorded when the start-up hook wrote it, before the program's atexit hooks and its end
HANDLER = "preemption-handler"  # rank 0: the program constructed Preemption (handler: runtime); `auto` reads it
STATE_REMOVED = "state-removed"  # batch shell: the job completed; its resume state is gone (path)
RESTART = "restart"  # batch shell: the step is started again inside the allocation (cause, rank, node, error, ...)
HANG = "hang"  # a task's supervisor: no rank progressed for recovery.hang_timeout (rank, node, progressed, stacks)
REPEATED = "repeated-failure"  # batch shell: the step failed again the same way; not restarted nor requeued
CONTINUED = "continued"  # batch shell: a new job continues this one's work from its state (job: its id; cause)
FINISHED = "finished"  # rank 0: the program reached its end with no stop agreed (Preemption, at exit)
AUTO_WAIT = "auto-wait"  # batch shell: handler auto waits for the program to construct Preemption (sig, seconds)
CHECKPOINT_IGNORED = "checkpoint-ignored"  # rank 0's supervisor: a start began far behind the program's own last
#                                          checkpoint (line: what was lost and the fix; task/checkpoint_watch.py)
NODE_EXCLUDED = "node-excluded"  # batch shell: a node failed its check or Slurm marks it down (node, reason, spare)
# What a job's time went to (slurmgen/goodput/): written once per start of the program or sampled, never per step.
FIRST_STEP = "first-step"  # rank 0: the program's first should_stop() of this start (steps: 1)
PROGRESS = "progress"  # rank 0: a sample, at 1, 2, 4 ... s then every 60 s (steps, step_seconds: the recent mean)
LOAD = "load"  # rank 0: a resume state was loaded (seconds: how long the load blocked)
STEP_DONE = "step-done"  # batch shell, spec field steps: step `index` (of `steps`) completed; the next one starts
REHEARSAL = "rehearsal"  # the local emulator (slurmgen run): it made the stop that follows (what: preempt, kill, hang)
# What the start of one step records about itself: a run with several steps (spec field steps) decides on the
# current step's alone (History.current_step), while the run's own facts (its start, signals, requeues) stay.
STEP_SCOPED = frozenset(
    {STOP, FINISHED, HANDLER, TASK_EXIT, RAISED, RESTART, HANG, REPEATED, FIRST_STEP, PROGRESS, LOAD}
)

# Causes. A preemption is the scheduler's decision, not the job's fault: it has a budget of its own
# (preemption.max_preemptions), apart from the requeues the job asks for itself (preemption.max_requeues).
PREEMPTION = "preemption"
TIME_LIMIT = "time-limit"
FAILURE = "failure"
REQUESTED = "requested"  # the program asked (Preemption.request("requeue"))
EXTERNAL = "external"  # requeued by someone else (scontrol requeue by a user or admin, a node failure)
BAD_NODE = "bad-node"  # a node failed its check and no spare was left: requeued with it in ExcNodeList
OWN_CAUSES = frozenset({TIME_LIMIT, FAILURE, REQUESTED, BAD_NODE})


def history_dir(log_dir: str) -> str:
    return os.path.join(log_dir, DIR_NAME)


def append(log_dir: str, writer: str, event: str, run: int, time: float, **fields: Any) -> None:
    """Append one event to ``writer``'s file. Best effort is not enough here: errors propagate."""
    directory = history_dir(log_dir)
    trust.own_dir(directory)  # never a link or another user's directory (trust.py)
    record = {"v": FORMAT, "event": event, "run": run, "time": round(time, 3), "by": writer, **fields}
    line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
    fd = trust.open_write(os.path.join(directory, f"{writer}.jsonl"), mode=0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def read(log_dir: str) -> list[dict[str, Any]]:
    """Every event of every writer, in time order; torn or foreign lines are skipped."""
    directory = history_dir(log_dir)
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".jsonl"))
    except OSError:
        return []
    # The directory is checked once for all its files (a sweep's report reads thousands of histories).
    loose = trust.why_not_dir(directory) if names else None
    if loose is not None:
        _stderr(f"slurmgen: {directory}: not believed: {loose}")
        return []
    files: list[tuple[str, list[bytes]]] = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            # Another user's file (or link) in the history is never believed: it would steer requeues.
            data = trust.read_or_warn(path, _stderr, "believed", dir_checked=True)
        except OSError:
            continue
        files.append((path, (data or b"").splitlines()))
    events = _records([line for _, lines in files for line in lines])
    if events is None:  # some line is not an event: each file line by line, each bad line named and skipped
        events = [event for path, lines in files for event in _events_of(path, lines)]
    events.sort(key=_order)
    return events


def _order(event: dict[str, Any]) -> tuple[int, float]:
    return event["run"], float(event.get("time", 0))


def _records(lines: list[bytes]) -> list[dict[str, Any]] | None:
    """The events of lines (of one file or several) in one parse when every line is a whole, well-formed event
    (the usual case, several times faster than a parse per line); None when one is not."""
    try:
        found = json.loads((b"[" + b",".join(lines) + b"]").decode()) if lines else []
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return found if all(_flaw(record) is None for record in found) else None


def _events_of(path: str, lines: list[bytes]) -> list[dict[str, Any]]:
    """The well-formed events of one file's lines; each other line is skipped with a warning naming the file and
    the line (a torn last line of a writer that crashed mid-write, a disk error, a foreign or damaged record)."""
    found = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser's stack
            flaw: str | None = "not one JSON value (torn, not UTF-8, or nested too deep)"
        else:
            flaw = _flaw(record)
        if flaw is None:
            found.append(record)
        elif (path, number) not in _WARNED:  # once per process: status reads a history more than once
            _WARNED.add((path, number))
            _stderr(f"slurmgen: {path}:{number}: skipped: {flaw}")
    return found


_WARNED: set[tuple[str, int]] = set()


def number(value: object) -> float | None:
    """``value`` as a float when it is a record's number: a JSON number, finite (Python's json reads NaN and
    Infinity), never true or false, which Python takes for 1 and 0; else None, for a reader to take as absent."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e300:
        return float(value)
    return None


def _number(value: Any) -> bool:
    return number(value) is not None


SCALARS = (str, int, float, bool, type(None))


def _flaw(record: Any) -> str | None:
    """What keeps a parsed line from being an event whose fields every reader can use as their types say, or
    None: the shared fields (`event`, `run`, `time`, `by`) and the run start's `site` (slurm/site.py)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if not isinstance(record.get("event"), str):
        return "no text `event`"
    if not isinstance(record.get("run"), int) or isinstance(record["run"], bool):
        return "no whole-number `run`"
    if not _number(record.get("time", 0)):
        return "`time` is not a number of seconds"
    if not isinstance(record.get("by", ""), str):
        return "`by` is not text"
    site = record.get("site")
    if site is not None:
        windows = site.get("windows", {}) if isinstance(site, dict) else None
        if (not isinstance(site, dict) or not isinstance(windows, dict)
                or not all(isinstance(v, SCALARS) for k, v in site.items() if k != "windows")
                or not all(_number(v) for v in windows.values())):  # fmt: skip
            return "`site` is not shaped as a run start records it"
    return None


@dataclass
class Run:
    """One run of a job, summarised from its events."""

    run: int
    start: float | None = None
    end: float | None = None
    nodes: str | None = None
    sluid: str | None = None  # Slurm's id of this run (SLURM_JOB_SLUID, 26.05+), where it gave one
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
    ended: str | None = None  # how the run ended (slurmgen/interruption/: completed, stopped, requeued, ...)
    # The step's restarts inside the allocation (batch/restart.py): "crash: rank 1 on n2 (killed by SIGKILL),
    # 30 steps lost, 12.5 s lost" (restart_text), one per restart; and a failure that repeated and ended the run.
    restarts: list[str] = field(default_factory=list)
    repeated: str | None = None
    continued_as: str | None = None  # the job that continues this one's work (batch/continuation.py)
    # Nodes excluded in this run (batch/nodes.py): "node2: health check failed (exit 1)", one per node.
    excluded: list[str] = field(default_factory=list)
    fallback: str | None = None  # preemption.handler auto stopped a program without Preemption (batch/signals.py)
    steps_done: list[int] = field(default_factory=list)  # spec field steps: the steps this run completed (0-based)
    steps: int | None = None  # spec field steps: how many the job has (None: one, or no step completed yet)
    # A start that began far behind the program's own checkpoint (task/checkpoint_watch.py): its one line.
    checkpoint_ignored: list[str] = field(default_factory=list)


def runs(events: Iterable[Mapping[str, Any]]) -> list[Run]:
    """One summary per run, in run order."""
    by_run: dict[int, Run] = {}
    events = list(events)
    of_run: dict[object, list[Mapping[str, Any]]] = {}  # each run's events, for its restarts' steps lost
    for e in events:
        of_run.setdefault(e.get("run"), []).append(e)
    for e in events:
        r = by_run.setdefault(int(e["run"]), Run(int(e["run"])))
        kind, when = e.get("event"), e.get("time")
        if kind == RUN_START:
            r.start, r.nodes = when, e.get("nodes")
            r.sluid = e["sluid"] if isinstance(e.get("sluid"), str) else None
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
            r.fallback = e.get("fallback") or r.fallback
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
            r.restarts.append(restart_text(e, steps_lost(of_run[e.get("run")], e)))
            if r.requeued_by is None and r.cause != PREEMPTION:
                r.cause = None  # a stop of the start that failed (a casualty's TERM) is not why the run ended
        elif kind == CONTINUED:
            r.continued_as, r.cause = str(e.get("job") or "?"), e.get("cause") or r.cause
        elif kind == REPEATED:
            r.repeated = str(e.get("error") or "")
        elif kind == CHECKPOINT_IGNORED:
            r.checkpoint_ignored.append(printable(str(e.get("line") or "")))
        elif kind == NODE_EXCLUDED:
            r.excluded.append(f"{e.get('node')}: {e.get('reason')}")
        elif kind == STEP_DONE and isinstance(e.get("index"), int):
            r.steps_done.append(int(e["index"]))
            r.steps = int(e["steps"]) if isinstance(e.get("steps"), int) else r.steps
    return [by_run[n] for n in sorted(by_run)]


def count(value: object) -> int | None:
    """``value`` when it is a whole number (a record's count of steps), else None: JSON's true is no count."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def steps_lost(events: Sequence[Mapping[str, Any]], restart: Mapping[str, Any]) -> int | None:
    """The steps a restart inside the allocation made the program do again, as `history`, `status` and `report`
    all say it.

    The restart records (batch/restart.py) the steps its start made after its newest save (`steps_lost`), counted
    in `should_stop()` calls, and the program's own step it reached (`reached_step`). A program that saves between a
    step and its `should_stop(step=)` call saves step N as N - 1 calls, one step too many for the count. Where the
    program says its step, the next start's first sample tells where it really began (began_at); the steps lost
    are those between. That also counts a program that saves and resumes by itself, whose saves the restart never
    saw: its record holds every step of the start. Otherwise (no step said; a start that made no step, or began
    from scratch) the record stands."""
    reached = count(restart.get("reached_step"))
    began = resumed_from(events, restart)
    if reached is not None and began is not None:
        return max(reached - began, 0)
    return count(restart.get("steps_lost"))


def resumed_from(events: Sequence[Mapping[str, Any]], restart: Mapping[str, Any]) -> int | None:
    """The program's own step the start after ``restart`` began at, from that start's first progress sample
    (began_at); None when it says no step, or made none before the next restart."""
    at, run = float(restart.get("time") or 0.0), restart.get("run")
    later = sorted((e for e in events if e.get("run") == run and float(e.get("time") or 0.0) > at
                    and e.get("event") in (FIRST_STEP, RESTART, RUN_START)),
                   key=lambda e: float(e.get("time") or 0.0))  # fmt: skip
    return began_at(later[0]) if later and later[0].get("event") == FIRST_STEP else None


def began_at(first: Mapping[str, Any]) -> int | None:
    """The program's own step a start began at, from its first progress sample; None when it does not tell.

    A printed line (`printed`: spec section progress:) is the step the program is at: a program that resumed by
    itself from its own checkpoint at step 10 prints 11 or 10 first. `Preemption.should_stop(step=N)`, called
    after a step, holds as `steps` the steps this start made, so the start began that many steps before N
    (resumed from 20, it says 21 with one step made)."""
    step, made = count(first.get("step")), count(first.get("steps"))
    if step is None:
        return None
    if first.get("printed") is True:
        return step
    if made is not None and 0 < made < step:
        return step - made
    return None


def restart_text(event: Mapping[str, Any], steps: int | None = None) -> str:
    """One restart inside the allocation: "crash: rank 1 on n2 (killed by SIGKILL), 30 steps lost, 12.5 s lost"
    (cause, who failed where and why, then what it cost, where known: ``steps``, from steps_lost)."""
    seconds, reason = event.get("lost_seconds"), event.get("reason")
    steps = count(event.get("steps_lost")) if steps is None else steps
    text = f"{event.get('cause')}: {event.get('who')}"
    if isinstance(reason, str) and reason:
        text += f" ({reason})"  # why: "rendezvous failed: port 29517 in use", the exception it raised
    if isinstance(steps, int):
        text += f", {steps} step{'' if steps == 1 else 's'} lost"
    if isinstance(seconds, (int, float)):
        text += f", {seconds:g} s lost"
    return printable(text)  # the cause and who come from the history, the error line from a rank's log


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
    run; slurm/site.py site_preemption_event): mode, grace, version, ...; empty when nothing was recorded."""
    return sites(events).get(run, {})


def sites(events: Iterable[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """site_of for every run that recorded one, in one pass (the first record of a run stands)."""
    found: dict[int, Mapping[str, Any]] = {}
    for e in events:
        run = e.get("run")
        if e.get("event") == RUN_START and isinstance(run, int) and isinstance(e.get("site"), Mapping):
            found.setdefault(run, dict(e["site"]))
    return found


def site_mode(events: Iterable[Mapping[str, Any]], run: int) -> str | None:
    """The PreemptMode recorded at the start of ``run``, if any."""
    mode = site_of(events, run).get("mode")
    return str(mode) if mode else None


def last_save(history: Iterable[Run]) -> Run | None:
    """The latest run that saved, for the save-window check."""
    saved = [r for r in history if r.save_seconds is not None]
    return saved[-1] if saved else None


class History:
    """A job's run history, read once per decision, with the questions the runtime and the CLI ask of it.

    Built by `History.load(log_dir)` (one read of every writer's file) or from events already read; the run
    summaries are made once, on first use."""

    def __init__(self, events: Iterable[Mapping[str, Any]]) -> None:
        self.events: list[Mapping[str, Any]] = list(events)
        self._runs: list[Run] | None = None

    @classmethod
    def load(cls, log_dir: str | None) -> History:
        """The history in ``log_dir`` (empty outside slurmgen's script, which exports the log directory)."""
        return cls(read(log_dir) if log_dir else [])

    def current_step(self, number: int) -> History:
        """The history as the current step of run ``number`` sees it (spec field steps): that run's events of a
        step's own (STEP_SCOPED) from before its last completed step left out; every other event kept."""
        done = self.last_time(number, STEP_DONE)
        if not done:
            return self
        return History(
            e for e in self.events
            if not (e.get("run") == number and e.get("event") in STEP_SCOPED and float(e.get("time") or 0) <= done)
        )  # fmt: skip

    def steps_done(self) -> set[int]:
        """The steps (spec field steps) completed in any run of the job."""
        return {int(e["index"]) for e in self.all(STEP_DONE) if isinstance(e.get("index"), int)}

    def runs(self) -> list[Run]:
        if self._runs is None:
            self._runs = runs(self.events)
        return self._runs

    def run(self, number: int) -> Run | None:
        return next((r for r in self.runs() if r.run == number), None)

    def of_run(self, number: int, event: str | None = None) -> list[Mapping[str, Any]]:
        """The events of run ``number`` (of one kind when ``event`` is given), in time order."""
        return [e for e in self.events if e.get("run") == number and (event is None or e.get("event") == event)]

    def all(self, event: str) -> list[Mapping[str, Any]]:
        """Every event of one kind, of every run, in time order."""
        return [e for e in self.events if e.get("event") == event]

    def has(self, number: int, event: str) -> bool:
        return any(e.get("event") == event and e.get("run") == number for e in self.events)

    def counts(self) -> Counts:
        """The requeues made so far, by budget."""
        return counts(self.runs())

    def last_save(self) -> Run | None:
        return last_save(self.runs())

    def site(self, number: int) -> Mapping[str, Any]:
        return site_of(self.events, number)

    def site_mode(self, number: int) -> str | None:
        return site_mode(self.events, number)

    def announced(self, number: int) -> bool:
        """Did run ``number``'s rank 0 construct Preemption (HANDLER)?"""
        return self.has(number, HANDLER)

    def stop_by(self, number: int, actions: str) -> str | None:
        """The cause of run ``number``'s stop whose actions are ``actions`` (the batch shell's own), if any."""
        stop = next((e for e in self.of_run(number, STOP) if e.get("actions") == actions), None)
        return None if stop is None else str(stop.get("cause") or PREEMPTION)

    def step_restarts(self, number: int | None = None) -> int:
        """How often the step was started again inside the allocation (batch/restart.py), in run ``number`` or in
        every run: the one count that status, history, report and `slurmgen.Job` show beside the requeues."""
        return sum(1 for e in self.events if e.get("event") == RESTART and number in (None, e.get("run")))

    def last_time(self, number: int, event: str) -> float:
        """When run ``number`` last recorded ``event`` (epoch seconds; 0.0 when it never did)."""
        return max((float(e.get("time") or 0) for e in self.of_run(number, event)), default=0.0)

    def last_restart_time(self, number: int) -> float:
        """When the step of run ``number`` last started again inside the allocation (0 when it never did)."""
        return self.last_time(number, RESTART)

    def current_start(self, number: int) -> History:
        """This history as the current start of run ``number``'s step sees it: that run's events from its last
        restart inside the allocation on (batch/restart.py), every other run's as they are. A stop, a finish or a
        handler of a start that was restarted belongs to that start, not to the run's end."""
        since = self.last_restart_time(number)
        if not since:
            return self
        return History(e for e in self.events if e.get("run") != number or float(e.get("time") or 0) >= since)

    def since(self, time: float) -> list[Mapping[str, Any]]:
        """The events from ``time`` on (every run)."""
        return [e for e in self.events if float(e.get("time") or 0) >= time]
