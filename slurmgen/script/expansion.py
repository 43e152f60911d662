"""A spec value's `${NAME}` in the script (slurmgen/variables.py): a word the batch shell expands, or, for a name
that differs per task, the value as written, which each task's entry point expands from its own environment.

Either way the script holds the expansion, never a value: `render` shows `"${NAME}"`. In a batch-shell word each
variable becomes `"${NAME}"` (or `"${NAME:-text}"`, whose text the loader keeps free of `$`, backticks, backslashes
and quotes, so bash reads it as written inside the double quotes), and every other piece is single-quoted data.
A sweep's `{name}` placeholders are bash variables too (slurmgen/script/sweep.py hands them in as ``placeholder``).
"""

from __future__ import annotations

from collections.abc import Callable

from slurmgen import variables
from slurmgen.script.directives import sq
from slurmgen.script.shell_words import Shell

# A plain piece of text -> its shell words (a sweep's placeholders expanded; else just quoted).
Plain = Callable[[str], str]


def per_task(text: str) -> bool:
    """Whether the value names a variable that differs per task: the task expands it, not the batch shell."""
    return any(v.per_task for v in variables.variables(variables.split(text)))


def _variable(var: variables.Variable) -> str:
    return f'"${{{var.name}}}"' if var.default is None else f'"${{{var.name}:-{var.default}}}"'


def batch_word(text: str, plain: Plain = sq) -> str:
    """The value as one word of the batch shell: plain data (quoted later) when it expands nothing."""
    parts = variables.split(text)
    if plain is sq and all(type(p) is str for p in parts):
        return text  # nothing to expand: data
    if plain is sq and not variables.variables(parts):
        return "".join(p for p in parts if isinstance(p, str))  # only `$$`: the text it stands for, as data
    words = [_variable(p) if isinstance(p, variables.Variable) else sq(p) if isinstance(p, variables.Literal)
             else plain(p) for p in parts]  # fmt: skip
    return Shell("".join(words) or "''")


def task_word(text: str, plain: Plain | None = None) -> str:
    """The value as written, for the task to expand (`${NAME}` and `$$` stay as they are): plain data, or with a
    sweep (``plain``) a Shell word whose placeholders the batch shell fills, each `$` of a value doubled so that
    the task reads it as text."""
    if plain is None:
        return text
    out: list[str] = []
    for part in variables.split(text):
        if isinstance(part, variables.Variable):
            out.append(sq("${" + part.name + ("" if part.default is None else ":-" + part.default) + "}"))
        elif isinstance(part, variables.Literal):
            out.append(sq("$" + part))  # `$$` again, which the task reads as one `$`
        else:
            out.append(plain(part))
    return Shell("".join(out) or "''")


def word(text: str, plain: Plain = sq, task_plain: Plain | None = None) -> str:
    """A value of the step (a command word, an env value): expanded by the batch shell, or by each task
    (``task_plain``: the plain pieces of a word the task expands, with a sweep)."""
    return task_word(text, task_plain) if per_task(text) else batch_word(text, plain)
