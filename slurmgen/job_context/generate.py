"""Write job_context/variables.py, the typed fields of the job context, from the contract's table
(slurmgen.contract.variables()), and the table of variables in docs/runtime-internals.md.

The table is the one place a variable is declared: the renderer's exports (slurmgen.script.render), the job
context's fields and their parse, and the manual's table all come from it. The fields are written out, not made at
import, so that mypy --strict and editors see every field's type, and so that every in-job process, which imports
the job context, pays for one plain dataclass and nothing more.

    python -m slurmgen.job_context.generate          # rewrite variables.py and the manual's table
    python -m slurmgen.job_context.generate --check  # exit 1 when either is not what the table gives

tests/test_job_context_variables.py fails when either is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from slurmgen import contract
from slurmgen.contract_variable import Variable
from slurmgen.job_context import values

TARGET = Path(__file__).with_name("variables.py")
LINE_LENGTH = 120  # ruff's, in pyproject.toml: the written file is as `ruff format` leaves it
# The manual's page, in a source checkout (a wheel has no docs/).
DOCS = Path(__file__).resolve().parent.parent.parent / "docs" / "runtime-internals.md"
DOCS_BEGIN = "<!-- the table of variables: generated from slurmgen.contract.variables(), do not edit -->\n"
DOCS_END = "<!-- end of the generated table -->\n"

HEADER = '''\
"""Generated from the contract's table (slurmgen.contract.variables()) by `python -m slurmgen.job_context.generate`:
do not edit.

The job variables as typed fields, one per row of the table that has a field, each parsed by its row's parser, then
what derives from them (slurmgen/job_context/values.py). The job context (slurmgen/job_context/context.py) is
JobVariables with its questions about ranks. Python 3.9: the batch shell's helper and the task supervisor import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from slurmgen import contract
'''

# The fields that derive from the variables (each by its function of the whole environment in values.py): the job
# key from Slurm's three variables, the marker named by it, the run number, the lead time in whole seconds.
DERIVED = (
    ("key", "key_from", "job_key_of: None outside Slurm"),
    ("requeue_marker", "requeue_marker_from", "the marker a task leaves in state_dir for the batch shell"),
    ("run", "run_from", "this run's number in the run history: 1 for the first (restart_count + 1)"),
    ("lead_seconds", "lead_seconds_from", "lead_time as the spec gave it (whole seconds), for the site's window"),
)
ENVIRON = (
    "    environ: Mapping[str, str] = field(repr=False, compare=False)  # the whole environment, to hand to a child"
)


def rows() -> list[Variable]:
    """The rows that make a field of the job context."""
    return [row for row in contract.variables() if row.field]


def _constant(value: object, prefix: str = "") -> str | None:
    """The contract's name for ``value`` (``contract.PORT`` for "SLURMGEN_PORT"), None if it has none."""
    for name, known in vars(contract).items():
        if name.isupper() and name.startswith(prefix) and known is value:
            return f"contract.{name}"
    if isinstance(value, str) and not prefix:
        return next((f"contract.{n}" for n, v in vars(contract).items() if n.isupper() and v == value), None)
    return None


def _parser(row: Variable) -> tuple[str, str, bool]:
    """The row's parser: its name, its return type as written, and whether it takes the row's default."""
    parse = getattr(values, row.parse)
    return row.parse, parse.__annotations__["return"], parse.__code__.co_argcount == 3


def _default(row: Variable) -> str:
    literal = f'"{row.default}"' if isinstance(row.default, str) else repr(row.default)  # ruff format's quotes
    return _constant(row.default, "DEFAULT_") or literal


def variables_text() -> str:
    used = sorted({row.parse for row in rows()} | {name for _, name, _ in DERIVED} | {"Malformed"})
    one_line = f"from slurmgen.job_context.values import {', '.join(used)}"
    listed = ["from slurmgen.job_context.values import (", *(f"    {name}," for name in used), ")"]
    lines = [HEADER.rstrip("\n"), *([one_line] if len(one_line) <= LINE_LENGTH else listed), ""]
    lines += ["TYPE_CHECKING = False  # typing stays unloaded: every process imports this", "if TYPE_CHECKING:"]
    # typing.Self is new in 3.11; mypy checks for 3.10 and always has typing_extensions' stubs, and the import
    # never runs (TYPE_CHECKING is False outside the type checker).
    lines += ["    from typing_extensions import Self", "", ""]
    lines += ["@dataclass(frozen=True)", "class JobVariables:"]
    lines += ['    """The job variables, read once, and what derives from them."""', ""]
    lines += [f"    {row.field}: {_parser(row)[1]}  # {row.name}" for row in rows()]
    lines += [
        f"    {name}: {getattr(values, parse).__annotations__['return']}  # {why}" for name, parse, why in DERIVED
    ]
    lines += [ENVIRON, "", "    @classmethod", "    def from_environ(cls, environ: Mapping[str, str]) -> Self:"]
    lines += ['        """Every field from ``environ``, each by its parser."""', "        return cls("]
    for row in rows():
        name, _, takes_default = _parser(row)
        args = ["environ", _constant(row.name) or repr(row.name)] + ([_default(row)] if takes_default else [])
        lines.append(f"            {row.field}={name}({', '.join(args)}),")
    lines += [f"            {name}={parse}(environ)," for name, parse, _ in DERIVED]
    lines += ["            environ=environ,", "        )", ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def docs_table() -> str:
    """The manual's table of variables: name, who sets it (and from which spec field), default, who reads it."""
    lines = ["| variable | set by | default | read by | what |", "|---|---|---|---|---|"]
    for row in contract.variables():
        origin = f"the script, from `{row.spec}`" if row.spec else row.set_by
        if row.when:
            origin += f" (only with `{row.when}`)"
        default = "" if row.default in (None, "") else f"`{_shown(row.default)}`"
        readers = ", ".join(row.readers)
        lines.append(f"| `{row.name}` | {_cell(origin)} | {default} | {readers} | {_cell(row.doc)} |")
    return DOCS_BEGIN + "\n".join(lines) + "\n" + DOCS_END


def _shown(value: object) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def docs_text(page: str) -> str:
    """``page`` with its generated table replaced by the current one."""
    head, begin, rest = page.partition(DOCS_BEGIN)
    _, end, tail = rest.partition(DOCS_END)
    if not begin or not end:
        raise ValueError(f"{DOCS}: no generated table between {DOCS_BEGIN.strip()} and {DOCS_END.strip()}")
    return head + docs_table() + tail


def main(argv: list[str]) -> int:
    text, page = variables_text(), DOCS.read_text()
    if "--check" in argv:
        stale = [str(path) for path, want in ((TARGET, text), (DOCS, docs_text(page))) if path.read_text() != want]
        for path in stale:
            print(f"{path} is stale: run python -m slurmgen.job_context.generate", file=sys.stderr)
        return 1 if stale else 0
    TARGET.write_text(text)
    DOCS.write_text(docs_text(page))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
