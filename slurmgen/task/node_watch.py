"""What the hang watchdog knows of progress, at a cost that does not grow with the job (task/watchdog.py).

Every task's supervisor keeps its rank's chatter in the node's own directory (progress_mark.node_dir, in
/dev/shm): the program's progress mark (progress_mark.ProgressMark) and `out-<rank>`, touched when the program's
output grew (its stdout and stderr offsets, read from /proc: the rank log itself is never stat'ed). The newest
time in that directory is the node's progress; reading it costs the shared file system nothing.

One supervisor per node, the leader (LOCAL_RANK, else SLURM_LOCALID, 0; or any supervisor that sees the leader's
`lead` file go stale), speaks for the node across nodes through one shared file, `<log dir>/progress/heartbeat`:
- it publishes the node's newest progress there, rewritten in place through a descriptor it keeps open, at most
  once every `publish_period` seconds while the node progresses, and once at the first poll that sees it stop:
  at most one write per node per 10 s in steady state;
- it reads it (open, read, close: NFS's close-to-open consistency makes the open fetch it fresh, where a stat may
  answer from the attribute cache for up to a minute) only while its node has been idle for a hang timeout (a
  node whose ranks print nothing: all the time), at most once per period, and once more, fresh, before it calls
  a hang.
A node that still progresses keeps the heartbeat younger than the period plus a poll, well inside the limit; the
progress of a node that stopped is in the heartbeat within 2 polls. So a node calls a hang when its own ranks and
the heartbeat have been idle for the limit, the heartbeat 2 polls longer: no hang is called that the old
every-rank scan would not have called, and every node calls it within about a poll of the others.

On a hang the leader writes `hang` in the node directory; every supervisor of the node dumps its rank's stacks
and touches `dumped-<rank>` there; when all the node's ranks have, the leader appends one byte to the shared
`hang/dumped.run-<R>` and waits (one fresh open a second) until every node's byte is there or a bound has
passed, then writes `release`, and each supervisor kills its program. O_APPEND is not atomic on NFS: a lost byte
only makes the wait run to its bound.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import PROGRESS_DIR, leads_node, node_dir, write_node_file

HEARTBEAT = "heartbeat"
WaitFn = Callable[[float], bool]  # waits so many seconds; True when the watch is to stop
START_FACTOR = 4  # before any rank's first progress the limit is this many hang timeouts: start-up is slow
LEAD_STALE_POLLS = 3  # a leader that has not polled for this many intervals is gone: another supervisor leads


def poll_interval(timeout: float) -> float:
    # A poll reads only the node's own memory and /proc: it can be frequent (a call comes within 2 polls of the limit).
    return max(0.2, min(5.0, timeout / 20))


def publish_period(timeout: float) -> float:
    """Seconds between two writes of a node's heartbeat: 10 s, shorter for a hang timeout under 40 s."""
    return max(poll_interval(timeout), min(10.0, timeout / 4))


def local_ranks(job: JobContext) -> int:
    """How many ranks run on this node: torchrun's LOCAL_WORLD_SIZE, else Slurm's tasks of this node; 1 when the
    environment does not say."""
    try:
        ranks = job.ranks
    except RuntimeSetupError:
        return 1
    if ranks.local_world_size:
        return ranks.local_world_size
    return ranks.world_size if ranks.source != "slurm" and ranks.world_size > 0 else 1


def step_nodes(job: JobContext) -> int:
    """How many nodes the step runs on (its node list; 1 outside a step)."""
    from slurmgen.slurm.hostlist import HostlistError, expand_hostlist

    try:
        return max(1, len(expand_hostlist(job.step_nodes or job.nodes or "")))
    except (HostlistError, ValueError):
        return 1


def output_offset(pid: int) -> int | None:
    """How far the program has written into its stdout and stderr (their file offsets, from /proc; node-local)."""
    total, seen = 0, False
    for fd in (1, 2):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
                for line in info:
                    if line.startswith("pos:"):
                        total, seen = total + int(line.split()[1]), True
                        break
        except (OSError, ValueError):
            continue
    return total if seen else None


def newest_in(folder: str, prefixes: tuple[str, ...], since: float) -> float:
    newest = since
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith(prefixes):
                    with contextlib.suppress(OSError):
                        newest = max(newest, entry.stat().st_mtime)
    except OSError:
        pass
    return newest


def count_since(folder: str, prefix: str, since: float) -> int:
    try:
        with os.scandir(folder) as entries:
            return sum(1 for e in entries if e.name.startswith(prefix) and e.stat().st_mtime >= since)
    except OSError:
        return 0


def mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


class NodeWatch:
    """One supervisor's view of progress: its node's, and the other nodes' through the shared heartbeat."""

    def __init__(self, job: JobContext, rank: int, pid: int, started: float, timeout: float) -> None:
        self.job = job
        self.log_dir, self.dir, self.rank, self.pid = str(job.log_dir), node_dir(job), rank, pid
        self.started, self.timeout = started, timeout
        self.poll, self.period = poll_interval(timeout), publish_period(timeout)
        self.leader_by_id = leads_node(job)
        self.heartbeat = os.path.join(self.log_dir, PROGRESS_DIR, HEARTBEAT)
        self.offset = output_offset(pid)  # what the program had written when the watch began
        self.last_local = started
        self.published, self.published_at, self.heard, self.read_at = started, -1e18, started, -1e18
        self._fd: int | None = None

    def node_path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def leads(self, now: float) -> bool:
        if self.leader_by_id:
            with contextlib.suppress(OSError):
                write_node_file(self.node_path("lead"), "")
                os.utime(self.node_path("lead"), (now, now))  # the poll's clock: the others compare it with theirs
            return True
        return now - mtime(self.node_path("lead")) > LEAD_STALE_POLLS * self.poll

    def local_progress(self, now: float) -> float:
        """The node's newest progress; notes this rank's output growth first."""
        offset = output_offset(self.pid)
        if offset is not None and offset > (self.offset or 0):
            with contextlib.suppress(OSError):
                write_node_file(self.node_path(f"out-{self.rank}"), "")
        self.offset = offset if offset is not None else self.offset
        return newest_in(self.dir, ("rank-", "out-"), self.started)

    def publish(self, local: float, now: float) -> None:
        """Rewrite the heartbeat with the node's newest progress: at most once a period while the node progresses,
        and at the first poll that sees it stop (so progress not yet published is at most 2 polls old, or the node
        still progresses and published within the period)."""
        stopped, self.last_local = local == self.last_local, local
        if local <= self.published or (now - self.published_at < self.period and not stopped):
            return
        try:
            if self._fd is None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(os.path.dirname(self.heartbeat))
                self._fd = os.open(self.heartbeat, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            os.pwrite(self._fd, f"{local:020.3f}\n".encode(), 0)  # fixed width: rewritten in place, no truncate
            with contextlib.suppress(OSError):
                os.fsync(self._fd)  # on the server now: another node's open sees it
            self.published, self.published_at = local, now
        except OSError:
            pass

    def read_heartbeat(self, now: float) -> None:
        self.read_at = now
        try:
            with open(self.heartbeat, encoding="ascii") as handle:
                self.heard = max(self.heard, float(handle.read().strip() or 0.0))
        except (OSError, ValueError):
            pass

    def newest(self, now: float) -> tuple[float, bool]:
        """One poll: (the newest progress of any rank as far as this node can tell, whether a hang is called)."""
        local = self.local_progress(now)
        if not self.leads(now):
            called = mtime(self.node_path("hang")) >= self.started
            return local, called
        self.publish(local, now)
        lag = 2 * self.poll  # how old the progress of a stopped node not yet in the heartbeat can be
        progressed = max(local, self.heard) > self.started
        limit = self.timeout if progressed else START_FACTOR * self.timeout  # start-up: no rank progressed yet
        # A node whose own ranks print nothing (often all but rank 0) learns from the heartbeat that the job
        # progresses, and so leaves the start-up limit: once a period, when idle for a hang timeout.
        if now - local >= self.timeout and now - self.read_at >= self.period:
            self.read_heartbeat(now)
            progressed = max(local, self.heard) > self.started
            limit = self.timeout if progressed else START_FACTOR * self.timeout
        idle = min(now - local, now - self.heard - lag)
        if idle >= limit and now - self.read_at > self.poll:
            self.read_heartbeat(now)  # fresh, before calling it
            idle = min(now - local, now - self.heard - lag)
        if idle < limit:
            return max(local, self.heard), False
        with contextlib.suppress(OSError):
            write_node_file(self.node_path("hang"), f"{now}\n")
        return max(local, self.heard), True

    def note_dumped(self) -> None:
        with contextlib.suppress(OSError):
            write_node_file(self.node_path(f"dumped-{self.rank}"), "")

    def wait_all_dumped(self, deadline: float, wait: WaitFn) -> None:
        """Block until every rank of every node has written its stacks, or ``deadline`` (monotonic) passed."""
        since = mtime(self.node_path("hang"))
        mine, run = local_ranks(self.job), self.job.run
        while count_since(self.dir, "dumped-", since) < mine:
            if time.monotonic() > deadline or wait(0.2):
                return
        if self.leads(time.time()):
            self._wait_nodes(step_nodes(self.job), run, deadline, wait)
            with contextlib.suppress(OSError):
                write_node_file(self.node_path("release"), "")
            return
        while mtime(self.node_path("release")) < since:
            if time.monotonic() > deadline or wait(0.2):
                return

    def _wait_nodes(self, nodes: int, run: int, deadline: float, wait: WaitFn) -> None:
        if nodes <= 1:
            return
        path = os.path.join(self.log_dir, "hang", f"dumped.run-{run}")
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, b"+")
            finally:
                os.close(fd)
        while time.monotonic() <= deadline:
            with contextlib.suppress(OSError), open(path, "rb") as handle:  # a fresh open: NFS revalidates
                if os.fstat(handle.fileno()).st_size >= nodes:
                    return
            if wait(1.0):
                return
