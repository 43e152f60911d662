"""What the framework adapters share: the framework's own checkpoint, named by slurmgen's resume state.

A framework checkpoint is not atomic as a whole: a Hugging Face `checkpoint-N` directory is many files written by
several ranks, accelerate's `save_state` writes one RNG file per rank, Lightning writes one file through fsspec.
So each stop writes it under a new name, every rank waits until all ranks are done, and only then does rank 0
record its path in slurmgen's resume state, which is written atomically and keyed to the job and its spec
(runtime/state.py). A kill at any moment leaves the previous record and the checkpoint it names; a resumed run
never starts from a half-written one, nor from another job's.

Standard library at import; torch only inside the functions that need it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from slurmgen.runtime.preemption import Preemption

CHECKPOINT = "checkpoint"  # the key of the checkpoint's path in the recorded state

Handler = Callable[[int, Any], Any] | int | signal.Handlers | None


def log(message: str) -> None:
    print(f"slurmgen: {message}", file=sys.stderr, flush=True)


def default_directory(pre: Preemption, framework: str) -> str:
    """Where an adapter writes its checkpoints unless told: beside the resume state, keyed to the job."""
    return os.path.join(pre.state_dir, f"{pre.key}.{framework}")


def recorded_checkpoint(pre: Preemption) -> tuple[str, dict[str, Any]] | None:
    """The checkpoint the previous run recorded for this job and spec, and the whole record; else None.

    Call it on every rank: with a process group, rank 0 decides and tells the others (Preemption.load)."""
    state = pre.load()
    if not isinstance(state, dict) or not state.get(CHECKPOINT):
        return None
    path = str(state[CHECKPOINT])
    if not os.path.exists(path):
        if pre.rank == 0:
            log(f"the checkpoint {path} named by {pre.path} is gone; starting from the beginning")
        return None
    if pre.rank == 0:
        log(f"resuming from the checkpoint {path}")
    return path, state


def wait_for_all_ranks() -> None:
    """A barrier on the default process group, if there is one: every rank has written its part."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def record_and_exit(pre: Preemption, path: str, **extra: Any) -> None:
    """Once every rank has written its part of the checkpoint at `path`: record it, requeue if asked, exit."""
    wait_for_all_ranks()
    pre.save_and_exit({CHECKPOINT: os.path.abspath(path), **extra})


def prune(pre: Preemption, directory: str, pattern: str, keep: str | None) -> None:
    """Rank 0 removes the earlier stops' checkpoints (entries of `directory` matching `pattern`) but `keep`."""
    if pre.rank != 0:
        return
    keep = os.path.abspath(keep) if keep else None
    for entry in glob.glob(os.path.join(directory, pattern)):
        if os.path.abspath(entry) == keep:
            continue
        if os.path.isdir(entry):
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry)


def handlers_of(pre: Preemption) -> dict[int, Handler]:
    """The handlers Preemption installed, to put back where a framework replaces them."""
    return {sig: signal.getsignal(sig) for sig in (pre.signal, signal.SIGTERM, signal.SIGUSR2, signal.SIGCONT)}


def take_back(handlers: dict[int, Handler]) -> list[str]:
    """Reinstall `handlers` where something replaced them; the names of the signals that had been replaced."""
    if threading.current_thread() is not threading.main_thread():
        return []  # signal.signal works only there; the frameworks register theirs there too
    replaced = []
    for sig, handler in handlers.items():
        if signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)
            replaced.append(signal.Signals(sig).name)
    return replaced
