"""Whether a job's history is enough to advise a checkpoint interval on (goodput/advice.py), and the one line that
says why not where it is too thin: an interval made of too little is worse than none.

Too thin, in this order:
- no save seen at all, where the job was stopped (only slurmgen's own stop of the step, or the program's watched
  checkpoint that never changed): there is no save cost C;
- saves, but none timed (each was over within a poll of the checkpoint watch, and no progress line after it told
  its cost): no C;
- one save: neither a mean cost nor the interval between two saves;
- every interruption was a rehearsal (`slurmgen run --preempt-after`, `--kill-rank`, `--hang-rank`): the test's
  choice of a moment says nothing of how often the job is interrupted, so there is no M.

Pure: a job's events in, a line or None out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slurmgen import run_history as rh

NOT_ADVISED = "checkpoint interval: not advised: "
UNTIMED = (
    NOT_ADVISED + "no save of the program was timed (a glob of checkpoint.path that matches its temporary file "
    "too, e.g. out/ckpt.pt*, times each save by its rename; a progress line after each save times it by the gap)"
)


def too_thin(events: Sequence[Mapping[str, Any]], interruptions: int) -> str | None:
    """The line saying why no interval is advised, or None when the basis is enough (or nothing at all happened:
    a job that neither saved nor stopped has no advice to withhold)."""
    saves = [e for e in events if e.get("event") == rh.SAVE]
    if not saves:
        stopped = any(e.get("event") in (rh.STOP, rh.RESTART) for e in events)
        watched = any(e.get("event") == rh.CHECKPOINT_IGNORED for e in events)
        if not stopped and not watched:
            return None
        only = ", only slurmgen's own stop of the step" if stopped else ""
        return (NOT_ADVISED + f"no save of the program seen{only}: no save cost to weigh (spec field "
                "checkpoint.path names the file the program saves, or save with Preemption)")  # fmt: skip
    if not any(isinstance(e.get("seconds"), (int, float)) for e in saves):
        return UNTIMED
    if len(saves) < 2:
        return NOT_ADVISED + "one save seen: a save's cost and the interval between saves need two at least"
    rehearsed = sum(1 for e in events if e.get("event") == rh.REHEARSAL)
    if interruptions > 0 and rehearsed >= interruptions:
        return (NOT_ADVISED + f"the only interruption{'s were' if interruptions > 1 else ' was a'} rehearsal"
                f"{'s' if interruptions > 1 else ''} (slurmgen run --preempt-after, --kill-rank, --hang-rank): a "
                "moment chosen for a test says nothing of how often the job is interrupted")  # fmt: skip
    return None
