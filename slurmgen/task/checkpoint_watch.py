"""The watch on the program's own checkpoint (spec field checkpoint.path), run by rank 0's supervisor.

A program that saves by itself (nanoGPT's `ckpt.pt`) tells slurmgen nothing; its saves are seen here, from
outside, and recorded as `save` events (cause `program`) in the run history, where `status` ("last save"),
`report` (saves, their cost, the work each stop lost back to the last save) and the restart's lost time read
them as they read `Preemption`'s.

Cost: one `stat` of a file, one listing and one `stat` per entry of a directory (its newest entry tells a file
rewritten in place; `_directory`), or one `glob` for a pattern, per poll, in one process of the whole job (rank 0's
supervisor): flat in ranks and nodes, never per step (bench/scale.py, rows "checkpoint watch"). A save is recorded
once its signature (inode, size, mtime; a glob's names) has held for one poll, so a file still being written is not
taken for a save.

A save's cost, where it can be seen from outside, and how (`basis`):
- `rename`: a glob that matches the temporary name too (`out/ckpt.pt*`) sees the temporary file appear, then
  the final name take its place: the time between the two (within a poll);
- `write`: a file written in place seen mid-write: from the mtime first seen changing to the last write's;
- otherwise `seconds` is left out (basis `unseen`): the save was over within one poll;
- `progress`: a save not seen from its start to its rename (`write`, `unseen`) of a program whose progress lines
  rank 0's supervisor reads (spec section progress:): the gap between the lines around the save beyond the usual
  time between lines (slurmgen/save_gap.py). Such a save is recorded once the lines after it tell its cost, or
  with its own basis after PENDING_MAX seconds or at the program's end.

At the first progress of a start after the first (`first-step`, which `Preemption` or the program's output
lines give), the watch compares the program's step with the step of its last save (timed against the previous
start's progress samples): a program that started far behind it lost that work in silence, and one line says so
in the batch log and, as a `checkpoint-ignored` event, in `status`, `history` and `report`. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from slurmgen import run_history, trust
from slurmgen.checkpoint_steps import CAUSE, older_save, silent_loss
from slurmgen.job_context.context import JobContext
from slurmgen.save_gap import gap_cost

# Not `typing`'s: the supervisor starts without it (bench/startup.py). mypy treats this like typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

WRITER = "checkpoint"
POLL = 1.0  # seconds between two looks at the checkpoint: one stat (or glob) each, in one process of the job
SETTLE = 0.5  # seconds without a write after which a changed file is a finished save
PENDING_MAX = 60.0  # seconds a save waits for the progress lines that tell its cost: at most a sample's gap

Look = Callable[[], "Sighting | None"]


@dataclass(frozen=True)
class Sighting:
    """What one look at the checkpoint found: a file or directory's signature, or a glob's names."""

    names: tuple[str, ...]  # the path found (one), or a glob's matches, sorted
    ino: int = 0
    size: int = 0
    mtime: float = 0.0

    def key(self) -> tuple[object, ...]:
        return (self.names, self.ino, self.size, self.mtime)


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")  # glob.has_magic's characters; glob itself only for a pattern


def look_at(pattern: str, cwd: str = "") -> Sighting | None:
    """One look: one stat of a file or directory, or one glob; None when nothing is there. The names found are
    as the spec writes them: relative to ``cwd`` when the pattern is."""
    relative = not os.path.isabs(pattern) and bool(cwd)
    path = os.path.join(cwd, pattern) if relative else pattern
    if is_glob(pattern):
        import glob

        found = sorted(glob.glob(path))
        names = tuple(os.path.relpath(name, cwd) if relative else name for name in found)
        return Sighting(names) if names else None
    try:
        info = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return _directory(pattern, path, info)
    return Sighting((pattern,), info.st_ino, info.st_size, info.st_mtime)


def _directory(pattern: str, path: str, info: os.stat_result) -> Sighting:
    """A directory's signature: its inode, and the newest of its own mtime and its entries' (the entry's size).

    A directory's mtime moves when an entry is added, removed or renamed, not when a file in it is written
    (stat(2), "st_mtime"): Lightning's ModelCheckpoint creates `epoch=0-step=20.ckpt`, then writes `last.ckpt` over
    the one it wrote before; only that file's mtime tells when the save ended. One level: a save that is a
    directory of its own (Hugging Face's `checkpoint-500/`, a sharded save's `step-100/` with one file per rank)
    moves its own mtime with each file it creates, the last one included, and is not listed, so the cost grows
    with the saves kept at the top, never with the ranks. Entries are not followed through links (lstat): a link
    made to the newest save (`save_last: link`) is a save when it is made. Every entry counts, so a log written
    in the directory would look like saves: docs/preemption.md asks for a directory of saves alone."""
    newest, size = 0.0, 0
    try:
        names = os.listdir(path)
    except OSError:
        names = []
    for name in names:
        try:
            entry = os.stat(os.path.join(path, name), follow_symlinks=False)
        except OSError:  # removed since the listing (a save_top_k's older save)
            continue
        if entry.st_mtime >= newest:
            newest, size = entry.st_mtime, entry.st_size
    return Sighting((pattern,), info.st_ino, size, max(newest, info.st_mtime))


def exists(pattern: str, cwd: str = "") -> bool:
    return look_at(pattern, cwd) is not None


@dataclass(frozen=True)
class Save:
    """One save seen: when it was durable, its size where known, what it cost and how that was told."""

    time: float
    path: str
    size: int | None
    seconds: float | None
    basis: str  # rename, write, unseen


class Watch:
    """The saves in a sequence of looks (pure: each look's result and its time are passed in).

    A file or directory's new signature is a save once its mtime is SETTLE seconds old at a look (a file being
    written has an mtime of now); a glob's new name is a save at the look that finds it, unless it is gone at the
    next (a temporary file, whose time then starts the save that replaces it)."""

    def __init__(self, first: Sighting | None) -> None:
        self.recorded = first  # what was there when the watch began is no save of this start
        self.moving_since: float | None = None  # a file seen mid-write: its mtime at the first such look
        self.fresh: tuple[str, float] | None = None  # a glob: a name found at the last look, and when

    def see(self, now: Sighting | None, at: float) -> Save | None:
        if now is None or (self.recorded is not None and now.key() == self.recorded.key()):
            return None
        if now.ino:
            return self._file(now, at)
        return self._names(now, at)

    def last(self, now: Sighting | None, at: float) -> Save | None:
        """The last look, after the program ended: nothing writes any more, so what changed is a save."""
        if now is None or (self.recorded is not None and now.key() == self.recorded.key()):
            return None
        return self._file(now, now.mtime + SETTLE) if now.ino else self._names(now, at, final=True)

    def _file(self, now: Sighting, at: float) -> Save | None:
        if at - now.mtime < SETTLE:  # still being written
            self.moving_since = now.mtime if self.moving_since is None else self.moving_since
            return None
        self.recorded, moving, self.moving_since = now, self.moving_since, None
        if moving is not None and moving < now.mtime:
            return Save(now.mtime, now.names[0], now.size, round(now.mtime - moving, 3), "write")
        return Save(now.mtime, now.names[0], now.size, None, "unseen")

    def _names(self, now: Sighting, at: float, final: bool = False) -> Save | None:
        names = set(now.names)
        known = set(self.recorded.names) if self.recorded is not None else set()
        fresh, self.fresh = self.fresh, None
        new = sorted(names - known - ({fresh[0]} if fresh else set()))
        found: Save | None = None
        if fresh is not None and fresh[0] not in names:  # the name found last time went: a temporary file
            if new:
                found, new = Save(at, new[-1], None, round(at - fresh[1], 3), "rename"), []
                known.add(found.path)
        elif fresh is not None:  # it stayed: a save, made when it was found
            found = Save(fresh[1], fresh[0], None, None, "unseen")
            known.add(fresh[0])
        if new and final and found is None:
            known.update(new)
            found = Save(at, new[-1], None, None, "unseen")
        elif new:
            self.fresh = (new[-1], at)  # a save, unless it is gone at the next look
            known.update(new[:-1])
        self.recorded = Sighting(tuple(sorted(known & names)))
        return found


def missed(events: Sequence[Mapping[str, Any]], first: Sighting | None) -> tuple[int, Save] | None:
    """A save the watch of an earlier start did not live to record (a save in its last poll, then the step's
    SIGKILL ended its supervisor before the last look): the checkpoint a start finds is newer than every program
    save recorded. Returned with the run whose events it falls among, to be recorded for it; None when it was."""
    if first is None or not first.ino:
        return None
    saves = [float(e.get("time") or 0.0) for e in events if e.get("event") == run_history.SAVE
             and e.get("cause") == CAUSE]  # fmt: skip
    if saves and max(saves) >= first.mtime - 1e-3:
        return None
    runs = [int(e.get("run") or 0) for e in events if float(e.get("time") or 0.0) <= first.mtime]
    if not runs:
        return None  # older than this job's history: another job's checkpoint, no save of this one
    return max(runs), Save(first.mtime, first.names[0], first.size, None, "unseen")


def watches(job: JobContext, rank: int | None) -> bool:
    """Whether this task's supervisor watches the checkpoint: rank 0's, with a checkpoint and a log directory."""
    return bool(job.checkpoint) and bool(job.log_dir) and rank == 0


def start(job: JobContext, rank: int | None, resumed: bool, say: Callable[[str], None],
          lines: Callable[[], Sequence[tuple[float, int]]] | None = None) -> Stopper | None:  # fmt: skip
    """Watch in a daemon thread while the program runs (rank 0's supervisor only); stop it when the program ends.
    ``lines`` gives the program's latest progress lines, where its output is read: they time the saves the file
    does not."""
    pattern, log_dir = job.checkpoint, job.log_dir
    if not pattern or not log_dir or not watches(job, rank):
        return None
    cwd = os.getcwd()
    began = time.time()
    first = look_at(pattern, cwd)
    watch, stop = Watch(first), threading.Event()
    # A start after the first, over a checkpoint of an earlier one: its first progress is compared with it.
    judge = first is not None and (job.run > 1 or job.step_attempt > 0)
    mine = os.path.join(run_history.history_dir(log_dir), "rank0.jsonl")
    state = {"said": False}  # one line per start: the first progress or the first save tells, not both

    def record(save: Save, run: int = job.run) -> None:
        fields: dict[str, Any] = {"cause": CAUSE, "kind": CAUSE, "path": save.path, "basis": save.basis}
        if save.size is not None:
            fields["bytes"] = save.size
        if save.seconds is not None:
            fields["seconds"] = save.seconds
        with contextlib.suppress(OSError, trust.Untrusted):
            run_history.append(log_dir, WRITER, run_history.SAVE, run, save.time, **fields)
        if state["said"] or not judge or run != job.run:
            return
        # The first save of a start after the first: an older-looking one than the checkpoint held is lost work.
        state["said"] = True
        line = older_save(run_history.read(log_dir), job.run, began, save.time, resumed)
        if line is not None:
            tell(line)

    def tell(line: str) -> None:
        say(f"warning: {line}")
        to_batch_log(log_dir, f"slurmgen: warning: {line}")
        with contextlib.suppress(OSError, trust.Untrusted):
            run_history.append(log_dir, WRITER, run_history.CHECKPOINT_IGNORED, job.run, time.time(), line=line)

    def judged() -> bool:
        """Whether this start's first progress is in (then said, if it lost work); one stat until it is."""
        try:
            if os.stat(mine).st_mtime < began:
                return False
        except OSError:
            return False
        events = run_history.read(log_dir)
        if not any(e.get("event") == run_history.FIRST_STEP and e.get("run") == job.run
                   and float(e.get("time") or 0.0) >= began for e in events):  # fmt: skip
            return False
        line = silent_loss(events, job.run, began, resumed)
        if line is not None and not state["said"]:
            state["said"] = True
            tell(line)
        return True

    pending: list[tuple[Save, float]] = []  # saves waiting for the progress lines after them, and since when
    seen: list[float] = []  # every save of this start: none of them is part of the usual time between lines

    def saw(save: Save, at: float) -> None:
        seen.append(save.time)
        if lines is None or save.basis == "rename":
            record(save)
        else:
            pending.append((save, at))

    def settle(at: float, final: bool = False) -> None:
        """Record the pending saves whose cost the lines now tell, and those that waited long enough."""
        if not pending:
            return
        now = lines() if lines is not None else []
        for save, since in list(pending):
            cost = gap_cost(now, save.time, seen)
            if cost is not None:
                record(Save(save.time, save.path, save.size, cost, "progress"))
            elif not (final or at - since >= PENDING_MAX):
                continue
            else:
                record(save)
            pending.remove((save, since))

    def loop() -> None:
        if judge:  # before the first look of this start: a save the last one missed counts for its own start
            late = missed(run_history.read(log_dir), first)
            if late is not None:
                record(late[1], late[0])
        waiting = judge
        while not stop.wait(POLL):
            at = time.time()
            save = watch.see(look_at(pattern, cwd), at)
            if save is not None:
                saw(save, at)
            settle(at)
            if waiting and judged():
                waiting = False
        at = time.time()
        save = watch.last(look_at(pattern, cwd), at)  # a save in the program's last poll
        if save is not None:
            saw(save, at)
        settle(at, final=True)
        done.set()

    done = threading.Event()

    threading.Thread(target=loop, name="slurmgen-checkpoint-watch", daemon=True).start()
    return Stopper(stop, done)


def to_batch_log(log_dir: str, line: str) -> None:
    """Append one line to the batch shell's log, where the user looks first: `<output>/<name>-<key>.log`, beside
    the job's log directory `<output>/<name>-<key>` (script/directives.py, batch_log and task_log_stem). Only a
    file of this user's, never through a link (trust.open_write); none there (spec field error, a renamed log):
    the node log has the line."""
    path = log_dir.rstrip("/") + ".log"
    if not os.path.isfile(path):
        return
    with contextlib.suppress(OSError, trust.Untrusted):
        fd = trust.open_write(path, mode=0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


@dataclass(frozen=True)
class Stopper:
    """Stops the watch once the program has ended, after its last look (bounded: a stat on a hung file system
    must not keep the task from ending)."""

    stop: threading.Event
    done: threading.Event

    def set(self) -> None:
        self.stop.set()
        self.done.wait(5.0)
