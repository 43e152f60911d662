"""The CLI's fast lane: `slurmgen render FILE [-o FILE] [--set K=V ...] [--templates DIR]` without importing Typer.

Typer (with click and pydantic behind it) costs more to import than rendering a script takes, and `render` is
the command people run in loops and editors. This module parses that one command line shape by hand and runs
the same action as the Typer command (`render_action`, shared by both); any other argv, including `--help`,
goes to Typer. Output, messages and exit codes are identical either way (tests/test_cli_fast.py).
"""

from __future__ import annotations

import os
import sys

from slurmgen import render_cache
from slurmgen.errors import Problem, SlurmgenError, SpecError


def err(line: str) -> None:
    print(line, file=sys.stderr)


def warn_all(warnings: tuple[Problem, ...] | list[Problem]) -> None:
    for w in warnings:
        err(f"warning: {w}")


def report(exc: SlurmgenError) -> int:
    """The one place an error becomes lines on stderr and an exit code."""
    if isinstance(exc, SpecError):
        for problem in exc.problems:
            err(f"error: {problem}")
    else:
        err(f"error: {exc}")
    return exc.exit_code


StrPath = str | os.PathLike[str]


def render_action(spec: StrPath, output: StrPath | None, overrides: list[str], templates: StrPath | None) -> None:
    spec, templates = os.fspath(spec), None if templates is None else os.fspath(templates)
    digest = render_cache.key(spec, overrides, templates)
    hit = render_cache.load(digest) if digest else None
    if hit is not None:
        messages, text = hit
    else:
        from slurmgen.render import doctor, render
        from slurmgen.spec import load_file

        loaded = load_file(spec, overrides)
        text = render(loaded.spec, templates)
        messages = [f"warning: {w}" for w in (*loaded.warnings, *doctor(loaded.spec, text))]
        if digest:
            render_cache.store(digest, messages, text)
    for line in messages:
        err(line)
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        from slurmgen.files import write_atomic

        write_atomic(output, text, mode=0o600)
        err(f"wrote {output}")


_VALUED = {"-o": "output", "--output": "output", "--set": "set", "-s": "set", "--templates": "templates"}


def parse_render(argv: list[str]) -> tuple[str, str | None, list[str], str | None] | None:
    """The arguments of a plain `render` command line, or None if Typer should handle it."""
    if not argv or argv[0] != "render":
        return None
    spec: str | None = None
    values: dict[str, list[str]] = {"output": [], "set": [], "templates": []}
    args = iter(argv[1:])
    for arg in args:
        name, eq, inline = arg.partition("=")
        if name in _VALUED and arg.startswith("-"):
            value = inline if eq else next(args, None)
            if value is None:
                return None
            values[_VALUED[name]].append(value)
        elif arg.startswith("-") and arg != "-":
            return None  # --help, unknown options, "--": Typer's job
        elif spec is None:
            spec = arg
        else:
            return None
    if spec is None or len(values["output"]) > 1 or len(values["templates"]) > 1:
        return None
    output = values["output"][0] if values["output"] else None
    templates = values["templates"][0] if values["templates"] else None
    return spec, output, values["set"], templates


def run(argv: list[str]) -> int | None:
    """Handle argv here if it is a plain render; None means "not mine"."""
    parsed = parse_render(argv)
    if parsed is None:
        return None
    try:
        render_action(*parsed)
    except SlurmgenError as exc:
        return report(exc)
    except KeyboardInterrupt:
        err("interrupted")
        return 130
    return 0
