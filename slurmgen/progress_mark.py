"""A rank's progress mark, kept where it costs the shared file system nothing: `Preemption.should_stop()` touches it at
most every MARK_PERIOD seconds (runtime/preemption.py) in the node's own directory (`node_dir`: /dev/shm, memory, never
the parallel file system), where the hang watchdog of every task of that node reads it (task/watchdog.py); its text is
the program's step, which a local run's runner reads to time a rehearsal by it (slurmgen/local/step_watch.py).

One rank per node (SLURM_LOCALID 0) also keeps `<log dir>/progress/rank-<N>` on the shared file system, rewritten
in place through a descriptor it keeps open, at most once every SHARED_MARK_PERIOD seconds: its text, the steps the
process has made, is what the batch shell reads to count the steps a restart loses (batch/restart.py), and a write
through an open descriptor is no open, create or stat on the metadata server. At 2,048 nodes that is one data
write per node per 10 s, where a mark per rank per second was 16,384 opens a second (bench/scale.py).
Below all three processes: standard library only."""

from __future__ import annotations

import contextlib
import os
import time
import zlib

from slurmgen import trust
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext

PROGRESS_DIR = "progress"
SHARED_MARK_PERIOD = 10.0  # seconds between two writes of a node's shared mark
# Seconds between two writes of a rank's node mark: the longest it lags the program's step. A tenth of a second, so
# that the last step of a program killed without a word (SIGKILL, a hang) is known to within a step or two of a
# quick loop: a node-local write (tmpfs), ten a second per rank at the most.
MARK_PERIOD = 0.1
LAST = "last"  # the node mark's last word once the program recorded its last sample (ProgressMark.touch)
NODE_ROOT = "/dev/shm"  # node-local memory on every Linux node; a job_container/tmpfs site gives each job its own


def progress_path(log_dir: str, rank: int) -> str:
    return os.path.join(log_dir, PROGRESS_DIR, f"rank-{rank}")


NODE_DIRS = "node-dirs"  # in the log directory: the private name a node took when its expected one was not ours
_taken: dict[str, str] = {}  # expected name -> the directory this process uses instead (resolved once)


def expected_node_dir(job: JobContext) -> str:
    """The name of this node's private directory for this job's per-rank chatter: one per user, log directory
    (one per job) and node name (a local run's emulated nodes share one machine's /dev/shm)."""
    return node_dir_name(job.log_dir or "", job.node_name or os.uname().nodename)


def node_dir_name(log_dir: str, node: str) -> str:
    """expected_node_dir of the job logging to ``log_dir``, on node ``node``."""
    root = NODE_ROOT if os.path.isdir(NODE_ROOT) else (os.environ.get("TMPDIR") or "/tmp")
    key = zlib.crc32(os.path.abspath(log_dir).encode())
    return os.path.join(root, f"slurmgen-{os.getuid()}-{key:08x}-{node.replace('/', '_')}")


def node_dir(job: JobContext) -> str:
    """This node's private directory for the job: the expected name (expected_node_dir), or, when a directory of
    that name is there and not ours to trust (another user's, a link, a loose mode: trust.breach), a fresh private
    one that the node's first task made (mkdtemp: a random name, 0700, ours) and recorded in the log directory
    (`node-dirs/<expected name>`), which every task and program of the node reads (`take_node_dir`)."""
    expected = expected_node_dir(job)
    if expected in _taken:
        return _taken[expected]
    try:
        info = os.lstat(expected)
    except OSError:
        return expected  # not there yet: the first use makes it ours (trust.private_dir)
    if trust.breach(expected, info, directory=True) is None:
        return expected
    return take_node_dir(job, expected)


def planted(path: str) -> str:
    """Why the directory at ``path`` is not ours to use (trust.breach's words), or "gone"."""
    try:
        found = trust.breach(path, os.lstat(path), directory=True)
    except OSError:
        return "gone"
    return "ours" if found is None else found[1]


def take_node_dir(job: JobContext, expected: str) -> str:
    """The fresh private directory that stands for ``expected`` on this node: the one recorded in the log
    directory when it is still ours, else a new one (mkdtemp beside ``expected``), recorded by a link that only
    one task of the node can make (link(2) fails with EEXIST): a task that lost the race uses the winner's.
    Raises trust.Untrusted (the log directory or the recorded one is not ours) or OSError."""
    if not job.log_dir:
        raise trust.Untrusted(f"{expected}: not used: it is not this user's, and no log directory can record another")
    folder = os.path.join(job.log_dir, NODE_DIRS)
    trust.own_dir(folder)
    record = os.path.join(folder, os.path.basename(expected))
    for _ in range(2):
        recorded = trust.read_bytes(record, "read")
        if recorded is not None:
            path = recorded.decode(errors="replace").strip()
            trust.private_dir(path)  # still ours, 0700, no link: else refused
            _taken[expected] = path
            return path
        import tempfile  # only here: random's import is no part of every supervisor's start (bench/startup.py)

        fresh = tempfile.mkdtemp(prefix=os.path.basename(expected) + "-", dir=os.path.dirname(expected))
        draft = f"{record}.{os.getpid()}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, fresh.encode() + b"\n")
        finally:
            os.close(fd)
        try:
            os.link(draft, record)
        except FileExistsError:
            os.rmdir(fresh)  # another task of the node was first: its directory is the node's
            continue
        finally:
            os.unlink(draft)
        _taken[expected] = fresh
        return fresh
    raise trust.Untrusted(f"{record}: not used: no directory could be recorded for {expected}")


def node_mark_path(source: JobContext, rank: int) -> str:
    return os.path.join(node_dir(source), f"rank-{rank}")


def leads_node(job: JobContext) -> bool:
    """Whether this task speaks for its node on the shared file system: local rank 0 (torchrun's, else Slurm's),
    or a process whose ranks the environment does not say."""
    try:
        return job.ranks.local_rank == 0
    except RuntimeSetupError:
        return True


def own_node_dir(job: JobContext) -> str:
    """This node's directory for the job, made or checked as the user's own 0700 directory (trust.private_dir):
    its name is computable by anyone on the node, and another user who made it first could write `hang` or
    `release` there (a healthy job killed as hung) or keep touching `rank-N` (a real hang hidden). Such a
    directory is never used: a fresh private one takes its place (node_dir). Raises trust.Untrusted or OSError
    only when no private directory can be had; the task's readers and writers use the directory once it passed."""
    path = node_dir(job)
    try:
        trust.private_dir(path)
    except trust.Untrusted:
        expected = expected_node_dir(job)
        if path != expected:
            raise
        path = take_node_dir(job, expected)  # planted between the look and the make: a fresh one, as above
    return path


MARK_WIDTH = 64  # bytes of a node mark, padded: rewritten in place, never truncated (_read_mark reads this many)


def write_node_file(path: str, text: str, in_place: bool = False) -> None:
    """A small file in the node's own directory, which is made on first use (0700: the user's own; a directory
    another user made first is refused, trust.Untrusted). ``in_place``: over the old text, not truncated first, so
    that a reader between the two never finds it empty (a mark, rewritten ten times a second, is of one width)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (0 if in_place else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:
        trust.private_dir(os.path.dirname(path))
        fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def node_marks(job: JobContext) -> bool:
    """Whether the ranks keep progress marks in the node's directory, in a job with a run history:
    - with the hang watchdog, which reads them, on every node;
    - in every local run (`slurmgen run`), whose step rehearsals (--at-step, --preempt-at-step) read rank 0's mark
      even when recovery is off (slurmgen/local/step_watch.py);
    - otherwise on the step's first node, rank 0's (block and cyclic distribution put it there), where the batch
      shell runs: rank 0's supervisor records its program's last step from its mark when the program was killed
      before it could (SIGKILL: the kernel's OOM killer), or the ended job would show a sample up to a minute old.
      The batch shell removes that node's directory once the step has ended (clear_node_dir), also when a task
      was killed before its supervisor could leave it. Under torchrun, whose c10d rendezvous numbers the nodes in
      the sorted order of their addresses (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py), rank 0 can
      be on another node (`node9` sorts after `node10`); its job shows the last sample instead, as before.
    At most ten small writes a second per rank, in node memory."""
    if not job.log_dir:
        return False
    return job.hang_timeout is not None or bool(job.local_dir) or job.node_id == 0


def clear_node_dir(job: JobContext) -> None:
    """After the step has ended (the batch shell, once srun returned: no task of the step is left on the node),
    remove this node's directory of the job, left by a task whose supervisor was killed before it could leave it
    (the step's SIGKILL after KillWait). Only this user's own directory, never through a link (trust.breach): the
    expected name, and the private one a task took in its place (node-dirs), as recorded."""
    if not job.log_dir:
        return
    import shutil  # only here: the batch shell's end, never the tasks' start

    expected = expected_node_dir(job)
    found = [expected]
    with contextlib.suppress(OSError, trust.Untrusted):
        recorded = trust.read_bytes(os.path.join(job.log_dir, NODE_DIRS, os.path.basename(expected)), "read")
        if recorded is not None:
            found.append(recorded.decode(errors="replace").strip())
    for path in found:
        with contextlib.suppress(OSError):
            if trust.breach(path, os.lstat(path), directory=True) is None:
                shutil.rmtree(path)


class ProgressMark:
    """Write this rank's progress mark at most every MARK_PERIOD seconds (Preemption.should_stop calls it every step) in
    the node's directory: its time is the progress the watchdog reads, its text the program's step (the steps made when
    the program does not say its step), which a local run's step rehearsals read; the node's first rank also rewrites
    its shared mark at most every SHARED_MARK_PERIOD seconds (``shared``: a second writer of the same rank, rank 0's
    supervisor reading the output's step, writes the node's mark only): its text, the steps made, is what the batch
    shell counts the steps a restart loses from (batch/restart.py)."""

    def __init__(self, job: JobContext, rank: int, shared: bool = True) -> None:
        self.node_path = node_mark_path(job, rank) if node_marks(job) else None
        if self.node_path is not None:
            try:  # the supervisor says why (task/watchdog.py); the program only keeps out of it
                own_node_dir(job)
            except (OSError, trust.Untrusted):
                self.node_path = None
        on = shared and bool(job.log_dir) and job.hang_timeout is not None
        self.path = progress_path(str(job.log_dir), rank) if on and leads_node(job) else None
        self.last = self.shared_last = -SHARED_MARK_PERIOD
        self._fd: int | None = None

    def touch(self, steps: int = 0, step: int | None = None, last: bool = False) -> None:
        """``steps`` made by this process; ``step``, the program's own (counted across resumes), when it says it.
        ``last``: the program recorded its last sample of this start (its end, a stop): the node mark says so now,
        whatever the time since the previous one, and its supervisor records none for it (unrecorded_mark)."""
        if (now := time.monotonic()) - self.last < MARK_PERIOD and not last:
            return
        self.last = now
        if self.node_path is not None:
            try:
                # the step shown first (what the watch of a rehearsal reads), then the steps of this process when
                # the program says its own step
                text = (f"{steps}\n" if step is None else f"{step}\n{steps}\n") + (f"{LAST}\n" if last else "")
                write_node_file(self.node_path, text.ljust(MARK_WIDTH - 1) + "\n", in_place=True)
            except (OSError, trust.Untrusted):
                self.node_path = None
        if self.path is not None and now - self.shared_last >= SHARED_MARK_PERIOD:
            self.shared_last = now
            try:
                self._write_shared(steps)
            except (OSError, trust.Untrusted):  # a planted link or file: no mark rather than a write through it
                self.path = None

    def _write_shared(self, steps: int) -> None:
        assert self.path is not None
        if self._fd is None:
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.dirname(self.path))
            # Never through a link, nor onto a file another user planted in the shared log directory (trust.py).
            self._fd = trust.open_write(self.path, append=False, mode=0o644)
        # Fixed width, so a rewrite in place needs no truncate (a setattr on the metadata server).
        os.pwrite(self._fd, f"{steps:>20}\n".encode(), 0)
        # The text and the time reach the server now, not at a writeback: the batch shell reads them at the end.
        with contextlib.suppress(OSError):
            os.fsync(self._fd)


def steps_marked(log_dir: str, rank: int, since: float) -> int | None:
    """The steps rank ``rank``'s process had made at its last mark, if it marked after ``since``; else None."""
    path = progress_path(log_dir, rank)
    try:
        if os.stat(path).st_mtime < since:
            return None
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
    except (OSError, ValueError):
        return None
    return int(text) if text.isdigit() else None


def read_node_mark(log_dir: str, node: str, rank: int) -> tuple[int, float] | None:
    """Rank ``rank``'s node mark on ``node`` for the job logging to ``log_dir``, read from outside the job (a local
    run's runner): its step and its time (st_mtime), or None when there is none yet. Only a directory of this
    user's own is read, the expected one or the one recorded in its place (take_node_dir): a mark planted by
    another user would fire a rehearsal early."""
    expected = node_dir_name(log_dir, node)
    folder = expected
    if planted(expected) not in ("ours", "gone"):
        try:
            recorded = trust.read_bytes(os.path.join(log_dir, NODE_DIRS, os.path.basename(expected)), "read")
        except (OSError, trust.Untrusted):
            return None
        if recorded is None:
            return None
        folder = recorded.decode(errors="replace").strip()
        if planted(folder) != "ours":
            return None
    try:
        fd = os.open(os.path.join(folder, f"rank-{rank}"), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    found = _read_mark(fd)
    if found is None:
        return None
    step, steps, when, _ = found
    return (steps if step is None else step), when


def unrecorded_mark(job: JobContext, rank: int) -> tuple[int | None, int, float] | None:
    """Rank ``rank``'s node mark, read by a task of its own node, when its program did not record a last sample
    after it (killed by a signal, which runs no code of its own): (the program's own step, None when it does not
    say one; the steps made; st_mtime). None when the program recorded its last, or there is no mark (none kept,
    none written, not a file of ours)."""
    if not node_marks(job):
        return None
    try:
        fd = os.open(node_mark_path(job, rank), os.O_RDONLY | os.O_NOFOLLOW)
    except (OSError, trust.Untrusted):
        return None
    found = _read_mark(fd)
    return None if found is None or found[3] else found[:3]


def _read_mark(fd: int) -> tuple[int | None, int, float, bool] | None:
    """The mark open on ``fd`` (closed here): the program's own step (None in a mark of one number, whose program
    says no step of its own), the steps made, its time, and whether the program recorded its last sample at it."""
    try:
        when = os.fstat(fd).st_mtime
        words = os.read(fd, MARK_WIDTH).decode("ascii", "replace").split()
    except OSError:
        return None
    finally:
        os.close(fd)
    last = words[-1:] == [LAST]
    numbers = words[:-1] if last else words
    if not 1 <= len(numbers) <= 2 or not all(word.isdigit() for word in numbers):
        return None
    if len(numbers) == 1:
        return None, int(numbers[0]), when, last
    return int(numbers[0]), int(numbers[1]), when, last
