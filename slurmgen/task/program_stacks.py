"""The program's own stack dump: CPython's faulthandler, registered on a signal at start by slurmgen's start-up hook.

py-spy reads a hung program's stacks from outside, but it is an extra install (slurmgen-torch[torch]). A Python
program the supervisor starts can also write its own: ``pyhook/sitecustomize.py`` calls
``faulthandler.register(STACKS_SIGNAL, fd, all_threads=True)`` before the program's first line. faulthandler's
handler is C code that walks every thread's Python frames without the GIL and without running Python, so it answers
while the main thread is blocked in C: a sleep, a lock, a collective (faulthandler's documentation:
"dump_traceback ... can be called in a signal handler"). It cannot answer a stopped process (SIGSTOP), nor a
program that is not Python or runs with -E, -I or -S (python_hook.hooks_python).

Where the dump goes: a file of the supervisor's without a name (O_TMPFILE: nothing to clean up), whose
descriptor the program inherits. Both hold the same open file, so what the program writes the supervisor reads
back with pread at the offsets it grew by.

The signal is a real-time one that neither Slurm nor torch uses, so it never meets a preemption or stop signal;
it is sent only once /proc shows the program catches it (an uncaught real-time signal would kill it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping

from slurmgen import contract

STACKS_SIGNAL = signal.SIGRTMIN + 6  # glibc keeps SIGRTMIN-2 and -1 for itself; +6 is clear of libraries' usual +0..+3
DUMP_WAIT = 5.0  # s for the program's dump to appear
SETTLE = 0.2  # s without growth after which the dump is complete


class ProgramStacks:
    """The supervisor's end: the file the program's faulthandler writes to, and asking for one dump."""

    def __init__(self) -> None:
        self.fd = unnamed_file("stacks")

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The program's environment with the hook's orders: the descriptor and the signal to register."""
        return {**env, contract.STACKS_FD: str(self.fd), contract.STACKS_SIGNAL: str(int(STACKS_SIGNAL))}

    def dump(self, pid: int, catches: Callable[[int], bool]) -> str:
        """Ask ``pid`` for its stacks and return them, or "" when it cannot answer (no handler, or no answer)."""
        if not catches(STACKS_SIGNAL) or is_stopped(pid):
            return ""  # a stopped program would take the signal only once continued: py-spy's part
        start = os.fstat(self.fd).st_size
        try:
            os.kill(pid, STACKS_SIGNAL)
        except ProcessLookupError:
            return ""
        size, grown_at, deadline = start, time.monotonic(), time.monotonic() + DUMP_WAIT
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now_size = os.fstat(self.fd).st_size
            if now_size != size:
                size, grown_at = now_size, time.monotonic()
            elif size > start and time.monotonic() - grown_at >= SETTLE:
                break
        return os.pread(self.fd, size - start, start).decode("utf-8", "replace")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def unnamed_file(what: str) -> int:
    """A file without a name in $TMPDIR (or /tmp), open for reading and writing. By hand rather than with
    `tempfile`, whose import (random) costs the supervisor's start tens of ms on a busy node. Raises OSError."""
    folder = os.environ.get("TMPDIR") or "/tmp"
    try:
        return os.open(folder, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:  # a file system without O_TMPFILE (open(2)): create it exclusively, then remove its name
        path = os.path.join(folder, f"slurmgen-{what}-{os.getpid()}-{time.monotonic_ns()}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.unlink(path)
        return fd


def is_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (SIGSTOP, or traced): its state in /proc/<pid>/stat is T or t (proc(5))."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False
