"""Rehearsals timed by the program's progress (`slurmgen run --preempt-at-step N`, `--kill-rank R --at-step N`,
`--hang-rank R --at-step N`): the moment is rank 0's program reaching step N of the first run, not a second of it.
On a loaded machine a program starts late and steps slowly, so a rehearsal at a fixed second lands before the
first step or in another phase of the program (its save, its restart); a step is the same phase however loaded
the machine is.

What is read: rank 0's progress mark in its node's directory (slurmgen/progress_mark.py; /dev/shm, never the
shared file system), which `Preemption.should_stop()` rewrites at most ten times a second with the program's step, and
rank 0's supervisor too for a program whose step the spec's `progress.pattern` finds in its output. A poll reads that
one small file in memory, and the step it says is at most a tenth of a second old. The run history's progress samples
say the same step but later and later (their gap doubles from 1 s to a minute: slurmgen/progress_sample.py), and reading
them means reading the history file.

A second step rehearsal counts only marks written after the first one fired: after a kill, that is the restarted
program's progress (the killed one's last mark is older), so `--kill-rank 0 --at-step 20 --preempt-at-step 30`
preempts the restarted step, not the dying one. A step not reached within `--step-wait` seconds of the run is
given up, said at once, and the run goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.progress_mark import read_node_mark

if TYPE_CHECKING:
    from slurmgen.spec.model import JobSpec

DEFAULT_WAIT = 600.0  # seconds of the run a step rehearsal waits for its step (--step-wait)
# Preemption itself, or the callback of one of slurmgen's integrations (Lightning, transformers, accelerate), which
# calls its should_stop() every step: `SlurmgenPreemption` has no word boundary before its `Preemption`
_USES_PREEMPTION = re.compile(r"\b(?:Slurmgen)?Preemption\b")
MAX_READ = 1 << 20


@dataclass(frozen=True)
class StepMoment:
    kind: str  # the runner's event kind: "preempt" or "rehearse" (--kill-rank/--hang-rank)
    step: int
    option: str  # as typed: "--preempt-at-step 30", "--kill-rank 1 --at-step 20"


def unknown_progress(spec: JobSpec, source: str, workdir: Path, option: str) -> str | None:
    """Why ``option`` cannot be timed by this job's progress (one line with the fix), or None when slurmgen knows
    its step: the spec's progress.pattern, or a program (its script, when it can be read) that uses Preemption. A
    command whose file cannot be read (`python -m pkg`, a binary) is taken at its word: a step never reached is said
    when --step-wait runs out."""
    from slurmgen.spec.where import command_script

    if spec.progress is not None:
        return None
    script = command_script(spec.command)
    if script is None:
        return None
    path = Path(script) if Path(script).is_absolute() else workdir / script
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_READ)
    except OSError:
        return None
    if _USES_PREEMPTION.search(text):
        return None
    return (
        f"{option}: {source}: slurmgen does not know the program's step ({script} does not use Preemption and the "
        "spec has no progress.pattern); add `progress: {pattern: '<regex of the line it prints each step, its group "
        "the step>'}`, or call Preemption.should_stop(step=...) each step, or time it with seconds (--after, "
        "--preempt-after)"
    )


class RankZeroProgress:
    """Rank 0's step as its node mark says it, for marks written at or after ``since`` (wall time). The node is
    found once among the allocation's (rank 0 runs on the step's first node); a poll then reads that one mark."""

    def __init__(
        self,
        log_dir: str,
        nodes: Sequence[str],
        since: float,
        read: Callable[[str, str, int], tuple[int, float] | None] = read_node_mark,
    ) -> None:
        self.log_dir, self.nodes, self.since, self._read = log_dir, tuple(nodes), since, read
        self._node: str | None = None
        self.seen: int | None = None  # the last step read, new or not (said when a step is given up)

    def step(self) -> int | None:
        """The step of rank 0's newest mark if it was written since ``since``; None otherwise."""
        order = ([self._node] if self._node else []) + [n for n in self.nodes if n != self._node]
        for node in order:
            got = self._read(self.log_dir, node, 0)
            if got is None:
                continue
            self._node = node
            value, when = got
            self.seen = value
            return value if when >= self.since else None
        return None
