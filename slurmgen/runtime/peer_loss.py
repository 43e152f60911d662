"""A rank whose collective failed exits at once with one line naming the cause (a peer died or stopped
answering), instead of a bare traceback and a hang in interpreter shutdown.

Two threads can find the loss at once: the training loop's collective and a background save's. The line is
written to file descriptor 2 itself, not through ``sys.stderr``: torch's excepthook points ``sys.stderr`` at a
``StringIO`` while it formats a traceback (``_distributed_excepthook`` in torch/distributed/distributed_c10d.py),
so a line printed by another thread meanwhile lands in that buffer and is gone at ``os._exit``. And one lock
orders them: a thread about to leave waits until a traceback being printed is out.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from slurmgen import exit_codes

# Re-entrant: the excepthook holds it while printing and then leaves through `leave`, on the same thread.
_LEAVING = threading.RLock()
# The frames of torch's collectives: c10d's, and the functional ones that DTensor and FSDP2 wait on.
_COLLECTIVE_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/_functional_collectives.py")


def _from_collective(tb: Any) -> bool:
    """Did the exception come out of torch.distributed's collective layer? (Checked by frame, not by message:
    gloo and NCCL word their errors differently in every release.)"""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
        if filename.endswith(_COLLECTIVE_FILES):
            return True
        tb = tb.tb_next
    return False


def write_stderr(line: str) -> None:
    """`line` and a newline on file descriptor 2, whatever ``sys.stderr`` points at just now."""
    data = f"{line}\n".encode("utf-8", "backslashreplace")
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(2, data) :]


def peer_loss_line(rank: int | str, during: str, error: BaseException, timeout: float | None = None) -> str:
    """THE peer-loss line, whoever finds the loss: the stop agreement, the checkpoint store, or this module's
    excepthook. It names the rank, what it was doing, the error's first line and the timeout it ran under."""
    first = (str(error).strip().splitlines() or [""])[0][:200]
    cause = f"{type(error).__name__}: {first}" if first else type(error).__name__
    waited = f"; timeout {timeout:g} s" if timeout is not None else ""
    head = f"slurmgen: rank {rank}: lost the other ranks {during} ({cause}{waited})"
    return f"{head}: a peer rank died or stopped answering; exiting"


def leave(line: str, exit: Callable[[int], Any], code: int = exit_codes.EXIT_PEER_LOST) -> None:
    """Say `line` and end the process with `code`, once: a second thread that gets here waits for the end.
    Returns only when `exit` does (tests replace it)."""
    with _LEAVING:
        for stream in (sys.__stdout__, sys.__stderr__):  # what the program printed before comes first
            with contextlib.suppress(Exception):
                stream.flush()  # type: ignore[union-attr]
        write_stderr(line)
        exit(code)


def _group_rank() -> int | str:
    """The failing collective's process group knows this rank; "?" where there is none."""
    dist = sys.modules.get("torch.distributed")
    try:
        return int(dist.get_rank()) if dist is not None and dist.is_initialized() else "?"
    except Exception:  # a group torn down by the failure
        return "?"


def install_peer_loss_hook(exit: Callable[[int], Any]) -> None:
    """An uncaught error from a collective means a peer died or stopped answering: say so in one line at the
    end of the traceback and exit at once (interpreter shutdown can hang in NCCL teardown, pytorch #75097)."""
    previous = sys.excepthook
    if getattr(previous, "_slurmgen", False):
        return

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        with _LEAVING:  # no other thread leaves while the traceback is being printed
            previous(kind, value, tb)
            if _from_collective(tb):
                leave(peer_loss_line(_group_rank(), "in a collective", value), exit)

    hook._slurmgen = True  # type: ignore[attr-defined]
    sys.excepthook = hook
