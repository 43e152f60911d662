"""The local job's processes: one process group (the batch shell leads it), found through /proc, ended with
SIGCONT + SIGTERM and, after KillWait, SIGKILL, as Slurm ends a job's processes at its time limit or requeue
(slurm.conf(5) KillWait). Signals always go to the whole group, never to one PID that may be a wrapper
(`timeout 120 python ...` killed by PID leaves the python running).

The runner is a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER): a task whose parent (the fake srun) died
is re-parented to the runner instead of init, so the runner reaps it (init in a container may never do that)
and also finds a descendant that left the group on purpose (setsid) once its parent is gone. Slurm's cgroups
would catch those; a process that leaves the group while its parent lives on is the one thing that escapes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable


def parse_stat(text: str) -> tuple[int, str, int, int]:
    """`/proc/<pid>/stat` -> (pid, state, ppid, pgrp). The command name may hold spaces and parentheses."""
    pid_text, _, rest = text.partition(" (")
    fields = rest.rpartition(") ")[2].split()
    return int(pid_text), fields[0], int(fields[1]), int(fields[2])


def start_time(pid: int) -> str | None:
    """When `pid` started (`/proc/<pid>/stat` field 22, in clock ticks since boot), or None if it is gone: with the
    pid it names one process, never a later one that reused the pid (proc(5))."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return handle.read().rpartition(") ")[2].split()[19]
    except (OSError, IndexError):
        return None


def processes() -> list[tuple[int, str, int, int]]:
    """(pid, state, ppid, pgrp) of every process now."""
    found: list[tuple[int, str, int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join("/proc", name, "stat"), encoding="utf-8", errors="replace") as handle:
                found.append(parse_stat(handle.read()))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def descendants(roots: list[int]) -> list[int]:
    """`roots` and every live process below them, parents first."""
    children: dict[int, list[int]] = {}
    for pid, state, ppid, _ in processes():
        if state not in ("Z", "X"):
            children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid`."""
    return sorted(pid for pid, state, _, pgrp in processes() if pgrp == pgid and state not in ("Z", "X"))


def become_subreaper() -> bool:
    """Make orphaned descendants this process's children (Linux 3.4+); False where that is not possible."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(36, 1, 0, 0, 0)) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def adopted(keep: int) -> tuple[list[int], list[int]]:
    """This process's children other than `keep` (the batch shell): (live ones, zombies). With the subreaper
    flag these are the job's orphans."""
    me = os.getpid()
    mine = [(pid, state) for pid, state, ppid, _ in processes() if ppid == me and pid != keep]
    return [p for p, s in mine if s not in ("Z", "X")], [p for p, s in mine if s in ("Z", "X")]


def reap(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def signal_process(target: int, signum: int, *, group: bool = False) -> bool:
    """Send to one process (the batch shell, as `--signal=B:` does), or with `group` to every process of the
    process group `target`; False when it is gone."""
    try:
        if group:
            os.killpg(target, signum)
        else:
            os.kill(target, signum)
    except ProcessLookupError:
        return False
    return True


def exit_code(returncode: int) -> int:
    """A return code as shells and srun report it: 128+N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def wait_empty(
    pgid: int,
    timeout: float,
    reap: Callable[[], object] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    hurry: Callable[[], bool] = lambda: False,
) -> list[int]:
    """Wait until no process is left in the group that is alive or still to be reaped here (reaping meanwhile), at
    most `timeout` s or until `hurry()` says so; the survivors."""
    return wait_gone(lambda: unreaped(pgid), timeout, reap, clock, sleep, hurry)


def unreaped(pgid: int) -> list[int]:
    """The group's live processes, and its zombies that will be ours to reap: our children, and the children of a
    member that is exiting. A process killed with its parent reaches this subreaper only once the parent's exit is
    done, which can be after the parent stopped counting as live; leaving then would hand the zombie to init."""
    rows = [(pid, state, ppid) for pid, state, ppid, pgrp in processes() if pgrp == pgid]
    members, me = {pid for pid, _, _ in rows}, os.getpid()
    return sorted(pid for pid, state, ppid in rows if state not in ("Z", "X") or ppid == me or ppid in members)


def wait_gone(
    members: Callable[[], list[int]],
    timeout: float,
    reap: Callable[[], object] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    hurry: Callable[[], bool] = lambda: False,
) -> list[int]:
    """Wait until `members()` lists nobody (calling `reap()` before each look), at most `timeout` s or until
    `hurry()` says so; the survivors, as listed by the last look (nothing was reaped after it)."""
    deadline = clock() + timeout
    while True:
        reap()
        left = members()
        if not left or clock() >= deadline or hurry():
            return left
        sleep(0.05)


def end_group(
    pgid: int,
    kill_wait: float,
    reap: Callable[[], object] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    hurry: Callable[[], bool] = lambda: False,
) -> tuple[bool, list[int]]:
    """SIGCONT and SIGTERM to the group, SIGKILL to what is left after `kill_wait` s. Returns (whether KILL was
    needed, the processes still there afterwards: should be none)."""
    signal_process(pgid, signal.SIGCONT, group=True)
    signal_process(pgid, signal.SIGTERM, group=True)
    if not wait_empty(pgid, kill_wait, reap, clock, sleep, hurry):
        return False, []
    signal_process(pgid, signal.SIGKILL, group=True)
    return True, wait_empty(pgid, 5.0, reap, clock, sleep)
