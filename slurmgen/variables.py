"""`${NAME}` variables in spec values: one syntax for every field that takes them, read here once.

A value is text with `${NAME}` (or `${NAME:-text}`, a literal default) in it. The script expands a variable in the
batch shell (it becomes `"${NAME}"` in the script, never its value), or in each task for a name that differs per
task (`per_task`): the task's entry point then expands the word from its own environment (`expand`). `$$` is a
literal `$`, so `$${NAME}` is the text `${NAME}`. Expansion never runs anything: `$(...)`, backticks and any other
`${...}` form (`${NAME:-$(cmd)}`, `${#NAME}`, `${NAME:=x}`) are refused when the spec is loaded. A bare `$NAME` is
left as written (the spec loader warns and names the `${NAME}` spelling).

Standard library only, and Python 3.9: each task's entry point expands its words with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# A default is literal text: no `$` (nothing nests), no backtick, backslash or quote (bash would read them inside
# the double quotes the script writes around the expansion), no `}` (it ends the expansion).
_DEFAULT = r"[^$`\\\"'}]*"
_VARIABLE = re.compile(r"\$\{(" + NAME + r")(?::-(" + _DEFAULT + r"))?\}")
_BARE = re.compile(r"\$(" + NAME + ")")

# Set by srun (srun(1), OUTPUT ENVIRONMENT VARIABLES) or by slurmgen's task entry point and torchrun in each task;
# the batch shell has none of them, or (CUDA_VISIBLE_DEVICES) the whole node's value.
PER_TASK = frozenset(
    {
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NODEID",
        "SLURMD_NODENAME",
        "SLURM_TASK_PID",
        "SLURM_STEP_ID",
        "SLURM_STEPID",
        "SLURM_GTIDS",
        "RANK",
        "LOCAL_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "CUDA_VISIBLE_DEVICES",
    }
)


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None = None  # `${NAME:-text}`: the text when NAME is unset or empty (as bash's `:-`)

    @property
    def per_task(self) -> bool:
        return self.name in PER_TASK


class Literal(str):
    """Text written with `$$`: never a variable, and never a sweep's placeholder either."""


Part = Union[str, Variable]  # noqa: UP007 (a value at run time: 3.9 has no `|` of types)


class VariableError(ValueError):
    """A value that would run a command or uses a `${...}` form slurmgen does not expand; the message says the fix."""


def split(text: str) -> list[Part]:
    """`/data/${USER}/x` -> ["/data/", Variable("USER"), "/x"]. Raises VariableError."""
    parts: list[Part] = []
    plain: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "`":
            raise VariableError(_refusal(text, "a backtick runs a command"))
        if char != "$":
            plain.append(char)
            i += 1
            continue
        if text.startswith("$$", i):
            # `$$` is one literal `$`; `$${...}` keeps its braces away from a sweep's `{name}` as well.
            end = text.find("}", i + 2) + 1 if text.startswith("$${", i) else 0
            literal = "$" + text[i + 2 : end] if end else "$"
            _flush(parts, plain)
            parts.append(Literal(literal))
            i = end if end else i + 2
            continue
        if text.startswith("$(", i):
            raise VariableError(_refusal(text, "$(...) runs a command"))
        if text.startswith("${", i):
            match = _VARIABLE.match(text, i)
            if match is None:
                raise VariableError(
                    f"{text!r}: {_shown(text, i)} is not a variable slurmgen expands: write ${{NAME}} or "
                    "${NAME:-text} (a literal default: no $, backtick, backslash, quote or }), or $${ for a literal ${"
                )
            _flush(parts, plain)
            parts.append(Variable(match[1], match[2]))
            i = match.end()
            continue
        plain.append(char)
        i += 1
    _flush(parts, plain)
    return parts


def _flush(parts: list[Part], plain: list[str]) -> None:
    if plain:
        parts.append("".join(plain))
        plain.clear()


def _shown(text: str, start: int) -> str:
    end = text.find("}", start)
    return text[start : end + 1] if end >= 0 else text[start:]


def _refusal(text: str, what: str) -> str:
    return (
        f"{text!r}: {what}, and slurmgen never runs one from a value: only ${{NAME}} is expanded; compute the value "
        "in a setup line or in your program, or write $$ for a literal $"
    )


def variables(parts: list[Part]) -> list[Variable]:
    return [p for p in parts if isinstance(p, Variable)]


def has_variables(text: str) -> bool:
    """Whether ``text`` holds a `${NAME}` to expand or a `$$` to unescape (a malformed one raises VariableError)."""
    return any(isinstance(p, (Variable, Literal)) for p in split(text))


def bare_names(text: str) -> list[str]:
    """The `$NAME`s written without braces, which stay as written: `$$` and `${...}` are not among them."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            i += 2
            continue
        match = _BARE.match(text, i)
        if match is not None:
            out.append(match[1])
            i = match.end()
            continue
        i += 1
    return out


def literal_text(parts: list[Part]) -> tuple[str, ...]:
    """The plain pieces of a value (a sweep's placeholders live there, not in a variable or a `$$` literal)."""
    return tuple(p for p in parts if isinstance(p, str) and not isinstance(p, Literal))


def expand(text: str, environ: Mapping[str, str]) -> str:
    """The value as a task sees it: each `${NAME}` from ``environ`` (unset: empty, or its default when unset or
    empty, as bash does), `$$` as `$`. Raises VariableError on a form the loader refuses."""
    out: list[str] = []
    for part in split(text):
        if isinstance(part, Variable):
            value = environ.get(part.name, "")
            out.append(value if value or part.default is None else part.default)
        else:
            out.append(part)
    return "".join(out)


def expand_all(template: dict[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Each value of ``template`` expanded from ``environ`` (not from one another: the order does not matter)."""
    return {key: expand(value, environ) for key, value in template.items()}
