"""The CLI's fast lane: `slurmgen render FILE [-o FILE] [--set K=V ...] [--templates DIR]` and
`slurmgen submit FILE [--set K=V ...] [--templates DIR]` without importing Typer.

Typer (with click and pydantic behind it) costs more to import than rendering a script takes, and `render` and
`submit` are the commands people run in loops, editors and scripts. This module parses those command line shapes
by hand and runs the same actions as the Typer commands (`render_action`, `submit_action`, shared by both); any
other argv, including `--help`, goes to Typer. Output, messages and exit codes are identical either way
(tests/test_cli_fast.py).

Both use the render cache: a repeated submit of an unchanged spec reads the script and what submitting needs to
know about the spec (slurmgen.plan.Job, stored next to it) instead of importing yaml and jinja2.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from slurmgen import render_cache
from slurmgen.errors import Problem, SlurmgenError, SpecError

if TYPE_CHECKING:
    from pathlib import Path

    from slurmgen.plan import Job, Plan
    from slurmgen.spec import JobSpec
    from slurmgen.submission import Submission


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
        _, text, messages = _fresh(spec, overrides, templates)
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


def _fresh(spec: str, overrides: list[str], templates: str | None) -> tuple[JobSpec, str, list[str]]:
    """Validate and render (the cache's miss path): the spec, the script, and the warning lines to print."""
    from slurmgen.render import doctor, render
    from slurmgen.spec import load_file

    loaded = load_file(spec, overrides)
    text = render(loaded.spec, templates)
    return loaded.spec, text, [f"warning: {w}" for w in (*loaded.warnings, *doctor(loaded.spec, text))]


_VALUED = {"-o": "output", "--output": "output", "--set": "set", "-s": "set", "--templates": "templates"}


def _parse(argv: list[str], command: str, valued: dict[str, str]) -> tuple[str, dict[str, list[str]]] | None:
    if not argv or argv[0] != command:
        return None
    spec: str | None = None
    values: dict[str, list[str]] = {name: [] for name in valued.values()}
    args = iter(argv[1:])
    for arg in args:
        name, eq, inline = arg.partition("=")
        if name in valued and arg.startswith("-"):
            value = inline if eq else next(args, None)
            if value is None:
                return None
            values[valued[name]].append(value)
        elif arg.startswith("-") and arg != "-":
            return None  # --help, unknown options, "--": Typer's job
        elif spec is None:
            spec = arg
        else:
            return None
    if spec is None or any(len(v) > 1 for k, v in values.items() if k != "set"):
        return None
    return spec, values


def parse_render(argv: list[str]) -> tuple[str, str | None, list[str], str | None] | None:
    """The arguments of a plain `render` command line, or None if Typer should handle it."""
    parsed = _parse(argv, "render", _VALUED)
    if parsed is None:
        return None
    spec, values = parsed
    output = values["output"][0] if values["output"] else None
    templates = values["templates"][0] if values["templates"] else None
    return spec, output, values["set"], templates


def parse_submit(argv: list[str]) -> tuple[str, list[str], str | None] | None:
    """The arguments of a plain `submit` (no --dry-run, --test-only, --wait), or None if Typer should handle it."""
    parsed = _parse(argv, "submit", {k: v for k, v in _VALUED.items() if v != "output"})
    if parsed is None:
        return None
    spec, values = parsed
    return spec, values["set"], values["templates"][0] if values["templates"] else None


# --- submit ----------------------------------------------------------------------------------------------------


def _job_cache(digest: str) -> str | None:
    directory = render_cache.cache_dir()
    return None if directory is None else os.path.join(directory, "submit", digest)


def load_for_submit(spec: StrPath, overrides: list[str], templates: StrPath | None) -> tuple[list[str], str, Job]:
    """The warnings, the script and the Job of a spec: from the render cache, else validated and rendered."""
    from slurmgen.plan import Job

    spec, templates = os.fspath(spec), None if templates is None else os.fspath(templates)
    digest = render_cache.key(spec, overrides, templates)
    cached = _job_cache(digest) if digest else None
    hit = render_cache.load(digest) if digest else None
    if hit is not None and cached is not None:
        try:
            with open(cached, encoding="utf-8") as f:
                return hit[0], hit[1], Job.from_json(f.read())
        except (OSError, ValueError, TypeError):
            pass
    resolved, text, messages = _fresh(spec, overrides, templates)
    job = Job.of(resolved)
    if digest and cached is not None:
        render_cache.store(digest, messages, text)
        from slurmgen.files import write_atomic

        try:
            os.makedirs(os.path.dirname(cached), mode=0o700, exist_ok=True)
            write_atomic(cached, job.to_json(), mode=0o600)
            render_cache.prune(os.path.dirname(cached))
        except OSError:
            pass  # best effort, like the render cache: only speed is lost
    return messages, text, job


def planned(spec: StrPath, overrides: list[str], templates: StrPath | None, base: Path) -> Plan:
    """Load (cache or fresh), print the warnings, and plan a submission recorded under ``base``."""
    from pathlib import Path

    from slurmgen.plan import new_token, plan

    messages, text, job = load_for_submit(spec, overrides, templates)
    for line in messages:
        err(line)
    return plan(Path(spec), job, text, base, Path.cwd(), new_token(), tuple(overrides))


def submit_action(spec: StrPath, overrides: list[str], templates: StrPath | None) -> Submission:
    """Submit a spec: warnings and a summary on stderr, the job id alone on stdout."""
    from slurmgen import submission
    from slurmgen.journal import Journal, home
    from slurmgen.slurm import SlurmClient

    base = home()
    p = planned(spec, overrides, templates, base)
    done = submission.submit(p, SlurmClient(), Journal(base))
    if done.recovered:
        err(f"note: sbatch timed out, but the job reached Slurm: found job {done.job_id} by its token {p.token}")
    for problem in done.problems:
        err(f"warning: {problem}")
    for other in done.others:
        err(f"warning: job {other} carries the same submission token; check it with `slurmgen status {other}`")
    cluster = f" on cluster {done.cluster}" if done.cluster else ""
    err(f"submitted job {done.job_id}{cluster}; run dir {p.run_dir}; logs in {p.log_dir}")
    print(done.job_id, flush=True)
    return done


def run(argv: list[str]) -> int | None:
    """Handle argv here if it is a plain render or submit; None means "not mine"."""
    rendering, submitting = parse_render(argv), parse_submit(argv)
    if rendering is None and submitting is None:
        return None
    try:
        if rendering is not None:
            render_action(*rendering)
        elif submitting is not None:
            submit_action(*submitting)
    except SlurmgenError as exc:
        return report(exc)
    except KeyboardInterrupt:
        err("interrupted")
        return 130
    return 0
