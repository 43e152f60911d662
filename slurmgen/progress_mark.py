"""A rank's progress mark: the file `<log dir>/progress/rank-<N>` that `Preemption.should_stop()` touches at most
once a second (runtime/preemption.py), whose time the hang watchdog reads as progress (task/watchdog.py) and whose
text, the steps the process has made, the batch shell reads to count the steps a restart loses (batch/restart.py).
Below all three processes: standard library only."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping

from slurmgen import trust
from slurmgen.job_context.context import JobContext

PROGRESS_DIR = "progress"


def progress_path(log_dir: str, rank: int) -> str:
    return os.path.join(log_dir, PROGRESS_DIR, f"rank-{rank}")


class ProgressMark:
    """Write this rank's progress mark at most once a second (Preemption.should_stop calls it every step): its
    time is the progress the watchdog reads, its text the number of steps this process has made (the batch shell
    counts the steps a restart loses from it: batch/restart.py)."""

    def __init__(self, source: JobContext | Mapping[str, str], rank: int) -> None:
        job = JobContext.of(source)
        self.path = progress_path(job.log_dir, rank) if job.log_dir and job.hang_timeout is not None else None
        self.last = 0.0

    def touch(self, steps: int = 0) -> None:
        if self.path is None or (now := time.monotonic()) - self.last < 1.0:
            return
        self.last = now
        try:
            self._write(steps)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._write(steps)
        except (OSError, trust.Untrusted):  # a planted link: no mark rather than a write through it
            self.path = None

    def _write(self, steps: int) -> None:
        assert self.path is not None
        # Never through a link another user planted in a shared log directory (trust.py).
        trust.write_whole(self.path, f"{steps}\n".encode(), mode=0o644)


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
