"""The spec's `progress:` section: how slurmgen reads a program's step from the program's own output.

Most programs never call `Preemption`, but they print their step (`iter 120: loss 2.31`). `pattern` is a regular
expression (Python's `re`, searched in each line rank 0's program writes to its stdout) whose one group is the
step; `total` is the step the run ends at, for an ETA. Rank 0's task supervisor reads those lines as it passes them
on to the rank's log (slurmgen/task/output_progress.py): the same sampled progress records `Preemption` writes.
"""

from __future__ import annotations

import re
from typing import Any

from slurmgen.spec.types import Ctx, Field, Int, Obj, Str
from slurmgen.spec.yaml_source import FieldPath

EXAMPLE = r'"^iter (\d+):"'


class StepPattern(Str):
    """A regular expression with exactly one group: the step."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        value = super().check(value, ctx, path)
        if not isinstance(value, str):
            return value
        try:
            groups = re.compile(value).groups
        except re.error as exc:
            return ctx.fail(
                path, f"is not a regular expression ({exc}); write one whose group is the step, e.g. {EXAMPLE}"
            )
        if groups != 1:
            has = "no group" if not groups else f"{groups} groups"
            return ctx.fail(
                path,
                f"has {has}; it needs exactly one, the step's digits, e.g. {EXAMPLE} "
                "(make other groups non-capturing: (?:...))",
            )
        return value


PROGRESS = Obj(
    {
        "pattern": Field(
            StepPattern(max_len=1024),
            "a regular expression searched in each line of rank 0's output; its one group is the step, e.g. "
            r"`^iter (\d+):`",
            required=True,
        ),
        "total": Field(Int(min=1, max=10**15), "the step the run ends at, for the ETA in `slurmgen status`"),
    },
    model="ProgressSpec",
)
