"""Removing a job's resume state once its work is done: the whole job at its end (batch/commands.py `end`), or one
of its steps before the next starts (spec field steps, batch/steps.py). Standard library only, as the batch shell's
helper is."""

from __future__ import annotations

import os
from collections.abc import Callable

from slurmgen import run_history
from slurmgen.job_context.context import JobContext
from slurmgen.requeue import record

WRITER = "batch-shell"


def remove_state(ctx: JobContext, key: str, say: Callable[[str], None], done: str = "the job completed") -> None:
    """The job (or one of its steps, batch/steps.py) completed: its resume state has nothing left to resume
    (docs/preemption.md, "Resume state"): the plain state file and every sharded checkpoint directory of it
    (runtime/checkpoint/layout.py), complete or not."""
    from slurmgen.runtime.checkpoint import layout

    state_dir = ctx.state_dir
    if not state_dir:
        return
    name = f"{key}.state"
    removed: list[str] = []
    try:
        if os.path.isfile(path := os.path.join(state_dir, name)):
            os.unlink(path)
            removed.append(path)
        for seq in layout.complete_seqs(name, layout.list_dir(state_dir)):
            layout.remove(state_dir, name, seq)
            removed.append(os.path.join(state_dir, layout.complete_name(name, seq)))
        removed += layout.sweep_dirs(state_dir, name)
    except OSError as exc:
        say(f"could not remove the completed job's resume state in {state_dir}: {exc.strerror or exc}")
    if removed:
        record(ctx, WRITER, run_history.STATE_REMOVED, paths=removed)
        shown = removed[0] if len(removed) == 1 else f"{removed[0]} and {len(removed) - 1} more"
        say(f"{done}: removed its resume state {shown}")
