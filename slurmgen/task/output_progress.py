"""The step a program prints, read from its output by rank 0's supervisor (spec section progress:).

Most programs keep their own checkpoints and never call `Preemption`, but they print their step
(`iter 120: loss 2.31`). With `progress.pattern` set, rank 0's supervisor gives its program a pipe for stdout
instead of the rank's log, copies every byte on to the log as it comes, and searches each whole line for the
pattern; the pattern's one group is the step. The steps feed the same sampled progress records `Preemption`
writes (slurmgen/progress_sample.py): the first step, then samples at 1, 2, 4 ... 32 s and every 60 s, and the
last one when the program's output ends (its end, or a stop: either closes the pipe). All of it in memory, in the
supervisor: no file per step, and the shared file system sees only the samples.

Only rank 0 reads (its steps are the job's); every other rank's output goes to its log directly, as without a
pattern. stderr is not read: it goes to the log directly, so a traceback is never held in the pipe.
Standard library only, like the rest of the supervisor.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import threading
import time
from collections.abc import Callable

from slurmgen import trust
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import ProgressMark
from slurmgen.progress_sample import ProgressSampler

CHUNK = 65536  # bytes per read of the pipe
MAX_LINE = 65536  # bytes of one line kept for the search; a longer line is passed on whole but not searched
JOIN_WAIT = 2.0  # s the supervisor waits for the rest of the output once its program has ended
RECENT = 64  # progress lines kept, with the time each was read: enough to tell a save's gap from the usual


def reads_output(job: JobContext, rank: int | None) -> bool:
    """Whether this task's supervisor reads its program's output: rank 0, a pattern, and a run history."""
    return rank == 0 and bool(job.progress_pattern) and bool(job.log_dir)


class StepReader:
    """Lines in, steps out: the last step found, and the sampler told of each (at monotonic ``clock()``), and the
    rank's node mark (``mark``: at most ten times a second, in node-local memory), which a local run's step rehearsals
    read as they read Preemption's."""

    def __init__(
        self,
        pattern: str,
        sampler: ProgressSampler,
        clock: Callable[[], float] = time.monotonic,
        mark: ProgressMark | None = None,
    ) -> None:
        self._pattern = re.compile(pattern.encode("utf-8", "surrogateescape"))
        self._sampler = sampler
        self._clock = clock
        self._mark = mark
        self._partial = b""
        self.step: int | None = None  # the last step the program printed
        # The latest lines' (epoch seconds, step), for the checkpoint watch's save cost (slurmgen/save_gap.py).
        self.recent: collections.deque[tuple[float, int]] = collections.deque(maxlen=RECENT)

    def feed(self, data: bytes) -> None:
        """Some bytes of output, cut anywhere: each line they end is searched."""
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:
            self._partial = self._partial[:MAX_LINE]
        for line in lines:
            self._line(line)

    def end(self) -> None:
        """The output has ended (the program's end, or a stop): the last line, then the last sample."""
        if self._partial:
            self._line(self._partial)
            self._partial = b""
        if self.step is not None:
            self._sampler.last(self.step, self._clock(), self.step)

    def _line(self, line: bytes) -> None:
        found = self._pattern.search(line.rstrip(b"\r"))
        if found is None or found.group(1) is None:
            return
        text = found.group(1).strip()
        if not text.isdigit():  # the group caught something else than a step: the line says nothing
            return
        self.step = int(text)
        self.recent.append((time.time(), self.step))
        self._sampler.step(self.step, self._clock(), self.step)
        if self._mark is not None:
            self._mark.touch(self.step, self.step)

    def lines(self) -> list[tuple[float, int]]:
        """The latest progress lines, oldest first (read from another thread: a copy of the deque)."""
        return list(self.recent)


def relay(source: int, sink: int, reader: StepReader) -> None:
    """Copy ``source`` to ``sink`` until end of file, every chunk also fed to ``reader``; then its end.

    The copy comes first and never stops for the reader: a reader's error ends the reading, not the copy."""
    reading = True
    while True:
        try:
            data = os.read(source, CHUNK)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for a signal in this thread
            continue
        except OSError:
            break
        if not data:
            break
        _write_all(sink, data)
        if reading:
            try:
                reader.feed(data)
            except Exception:
                reading = False
    with contextlib.suppress(Exception):
        if reading:
            reader.end()
    os.close(source)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except InterruptedError:  # pragma: no cover
            continue
        except OSError:  # the log is gone or full: the program runs on, its output is dropped as it would be
            return


def start(job: JobContext, source: int, sink: int) -> tuple[threading.Thread, StepReader]:
    """The relay of the program's stdout (``source``, the pipe's read end) to ``sink``, in a thread of its own, and
    the reader of its steps."""
    sampler = ProgressSampler(job, 0, job.progress_total, printed=True)
    try:
        mark: ProgressMark | None = ProgressMark(job, 0, shared=False)
    except (OSError, trust.Untrusted):  # no node directory of ours: no mark, the output is still relayed
        mark = None
    reader = StepReader(job.progress_pattern, sampler, mark=mark)
    thread = threading.Thread(target=relay, args=(source, sink, reader), name="slurmgen-output", daemon=True)
    thread.start()
    return thread, reader
