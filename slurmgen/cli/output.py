"""How the CLI speaks: human messages on stderr, results on stdout, one line per error with its exit code."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from slurmgen.errors import Problem, SlurmgenError, error_lines


def err(line: str) -> None:
    print(line, file=sys.stderr)


def warn_all(warnings: Iterable[Problem]) -> None:
    for w in warnings:
        err(f"warning: {w}")


def report(exc: SlurmgenError) -> int:
    """The one place an error becomes lines on stderr and an exit code."""
    for line in error_lines(exc):
        err(line)
    return exc.exit_code
