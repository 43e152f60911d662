"""A rank whose collective failed exits at once with one line naming the cause (a peer died or stopped
answering), instead of a bare traceback and a hang in interpreter shutdown."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from slurmgen import contract


def _from_collective(tb: Any) -> bool:
    """Did the exception come out of torch.distributed's collective layer? (Checked by frame, not by message:
    gloo and NCCL word their errors differently in every release.)"""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
        if filename.endswith("torch/distributed/distributed_c10d.py"):
            return True
        tb = tb.tb_next
    return False


def install_peer_loss_hook(exit: Callable[[int], Any]) -> None:
    """An uncaught error from a collective means a peer died or stopped answering: say so in one line at the
    end of the traceback and exit at once (interpreter shutdown can hang in NCCL teardown, pytorch #75097)."""
    previous = sys.excepthook
    if getattr(previous, "_slurmgen", False):
        return

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        previous(kind, value, tb)
        if _from_collective(tb):
            rank = os.environ.get("RANK", "?")
            first = (str(value).strip().splitlines() or [kind.__name__])[0]
            print(
                f"slurmgen: rank {rank}: a collective failed ({kind.__name__}: {first[:200]}): a peer rank died or "
                "stopped answering; exiting",
                file=sys.stderr,
                flush=True,
            )
            exit(contract.EXIT_PEER_LOST)

    hook._slurmgen = True  # type: ignore[attr-defined]
    sys.excepthook = hook
