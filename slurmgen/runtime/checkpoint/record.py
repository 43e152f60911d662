"""What one save cost (duration, bytes on disk), and whether a save of that cost fits the window of a stop.

Pure values and functions, standard library only: the records come from the save, the window from the spec
(lead time, grace time, KillWait), and the verdict is for whoever warns at start.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SaveRecord:
    """One durable save. Only made once the state is durable (the plain file renamed and its directory fsynced,
    or the sharded checkpoint's directory committed)."""

    path: str  # the plain state file, or the committed checkpoint directory
    kind: str  # "plain" (rank 0, one file) or "sharded" (every rank, torch.distributed.checkpoint)
    cause: str  # "periodic", "preemption", "time-limit", "terminated", ...
    size_bytes: int  # on disk: the file, or every file of the checkpoint directory
    duration_s: float  # from the save call to durable
    blocked_s: float  # how long the caller was held up; below duration_s only for an async save
    world_size: int  # ranks that wrote it (1 for plain)
    finished_at: float  # epoch seconds when it became durable


def fits_window(save_s: float, window_s: float, step_s: float = 0.0) -> bool:
    """Does finishing the current step and then a save of `save_s` seconds fit in `window_s` seconds?"""
    return step_s + save_s <= window_s


def window_warning(save_s: float, window_s: float, step_s: float = 0.0) -> str | None:
    """One line when it does not fit, else None."""
    if fits_window(save_s, window_s, step_s):
        return None
    step = f" plus a step of {step_s:.1f} s" if step_s else ""
    return (
        f"the last save took {save_s:.1f} s{step}, more than the {window_s:.1f} s between the stop signal and the "
        "kill: the final save may not finish (raise preemption.lead_time, or save less)"
    )
