"""The spec's `checkpoint:` and `resume:` sections: the program's own saves, and how it is told to resume from them.

Many programs save and resume by themselves (nanoGPT's `ckpt.pt`, a trainer's `--resume` flag). slurmgen does not
write those saves; it watches where they land (`checkpoint.path`: a file, a directory or a glob, relative to the
job's directory or absolute) to say when the program last saved and what a stop lost, and on every start after
the first where that checkpoint exists it appends `resume.args` to the command and sets `resume.env` (decided in
the job, where the checkpoint is visible: slurmgen/task/resume_flag.py).
"""

from __future__ import annotations

from typing import Any

from slurmgen.spec.types import BAD, Ctx, Field, List, Map, Obj, Str
from slurmgen.spec.yaml_source import REFUSED, FieldPath

ENV_KEY = r"[A-Za-z_][A-Za-z0-9_]*"


class ResumeArgs(List):
    """The words appended to the command: a list of texts, never one string split by guess."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if isinstance(value, str):
            return ctx.fail(
                path, f"is the text {value!r}; give a list of words, e.g. args: [{', '.join(value.split()) or '...'}]"
            )
        if value is not REFUSED and value is not None and not isinstance(value, list):
            return ctx.fail(path, f"is {type(value).__name__} {value!r}; give a list of words, e.g. [--resume]")
        return super().check(value, ctx, path)


class ResumeEnv(Map):
    """The variables set for a resumed start: one NAME: value per line."""

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if value is not REFUSED and not isinstance(value, dict):
            shown = "a list" if isinstance(value, list) else f"{type(value).__name__} {value!r}"
            return ctx.fail(path, f"is {shown}; give a mapping, one NAME: value per line, e.g. env: {{RESUME: 1}}")
        out = super().check(value, ctx, path)
        return BAD if out is BAD else out


CHECKPOINT = Obj(
    {
        "path": Field(
            Str(max_len=4096, pattern=r"(?!~).+", hint="~ is not expanded here; write the full path"),
            "where the program writes its own saves: a file, a directory or a glob, relative to the job's "
            "directory (chdir) or absolute; slurmgen watches it (one stat or glob per poll, on rank 0's node) for "
            "`status`, `report` and the lost work of each stop",
            required=True,
        ),
    },
    model="CheckpointSpec",
)

RESUME = Obj(
    {
        "args": Field(
            ResumeArgs(Str(max_len=4096)),
            "words appended to the command on every start after the first where checkpoint.path exists (a "
            "requeue, a restart inside the allocation, `slurmgen resume`), e.g. [--init_from=resume]",
        ),
        "env": Field(
            ResumeEnv(Str(pattern=ENV_KEY, hint="a shell variable name"), Str(numbers_ok=True, max_len=65536)),
            "variables set for the program on those same starts, e.g. {RESUME: 1}",
        ),
    },
    model="ResumeSpec",
)
