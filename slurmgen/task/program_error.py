"""The program's uncaught exception, recorded when it is raised: the rank that failed, not its casualties.

A rank that raises does not exit at once: atexit hooks, a tracker's finish, a data loader's shutdown can take
seconds. Its peers meanwhile lose it and exit with the peer-loss code (exit_codes.EXIT_PEER_LOST), and srun's
--kill-on-bad-exit then kills it with the step's signal (srun(1)): by exit codes and times alone, the raising
rank looks like the last casualty. torchelastic answers the same question with error files written from the
exception itself (torch.distributed.elastic.multiprocessing.errors, `record`). Here slurmgen's start-up hook
(``pyhook/sitecustomize.py``) wraps ``sys.excepthook`` and ``threading.excepthook``: the first uncaught exception
is written, as one JSON line (`error`, `time`, `thread`), before the traceback is printed and before atexit runs.

Where it goes: a file of the supervisor's without a name (program_stacks.py `unnamed_file`), whose descriptor the
program inherits; the supervisor reads it back once the program has ended. Nothing is left on disk, and nothing
another user wrote is read. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from slurmgen import contract

MAX_BYTES = 4096  # the hook writes one short line; more is not ours


@dataclass(frozen=True)
class Raised:
    error: str  # "ValueError: bad batch" (the exception's type and its message's first line)
    time: float  # epoch seconds when it was raised (reached the hook)
    thread: str  # the thread it ended ("MainThread")


class ProgramError:
    """The supervisor's end: the file the program's hook writes its uncaught exception to."""

    def __init__(self) -> None:
        from slurmgen.task.program_stacks import unnamed_file

        self.fd = unnamed_file("error")

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The program's environment with the descriptor the hook writes to."""
        return {**env, contract.ERROR_FD: str(self.fd)}

    def raised(self) -> Raised | None:
        """The first exception the program recorded, or None (it raised none, or its hook did not run)."""
        try:
            data = os.pread(self.fd, MAX_BYTES, 0)
        except OSError:
            return None
        return parse(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def parse(data: bytes) -> Raised | None:
    """The first line the hook wrote, or None when there is none or it is not the hook's."""
    line = data.split(b"\n", 1)[0]
    try:
        record = json.loads(line.decode("utf-8", "replace")) if line else None
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    error, when, thread = record.get("error"), record.get("time"), record.get("thread")
    if not isinstance(error, str) or not isinstance(when, (int, float)) or isinstance(when, bool):
        return None
    return Raised(error[:300], float(when), thread if isinstance(thread, str) else "?")
