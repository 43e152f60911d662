"""`slurmgen render`, `validate` and `schema`: the commands that need no cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurmgen.cli.options import ArgsArg, ClusterOpt, SetOpt, SpecArg, TemplatesOpt
from slurmgen.cli.output import err, warn_all
from slurmgen.errors import Problem, SpecError

if TYPE_CHECKING:
    from slurmgen.script.build import Build
    from slurmgen.spec.model import JobSpec
    from slurmgen.spec.profile import ClusterProfile

commands = typer.Typer()

# `-o -` and the idiom `-o /dev/stdout` both print the script (masked as on a terminal), never rename over a path
STANDARD_OUTPUT = ("-", "/dev/stdout")


def cluster_profile(cluster: str | None, spec: Path) -> ClusterProfile | None:
    """The profile of `--cluster NAME`, looked up in the user's clusters.yaml, then the one beside the spec."""
    if cluster is None:
        return None
    from slurmgen.spec.profile import find_profile

    return find_profile(cluster, spec.parent)


def compiled(
    spec: Path, overrides: list[str], templates: Path | None, cluster: str | None = None, args: tuple[str, ...] = ()
) -> Build:
    """The compile step (slurmgen.script.build) from this directory, through the API's path; its warnings go to
    stderr."""
    from slurmgen.submission.source import SpecSource
    from slurmgen.submission.source import compiled as api_compiled

    source = SpecSource(spec, tuple(overrides), cluster_profile(cluster, spec), tuple(args))
    return api_compiled(source, templates, err)


def load_and_render(spec: Path, overrides: list[str], templates: Path | None) -> tuple[JobSpec, str]:
    """Validate and render a spec; its warnings (and the script doctor's) go to stderr. The API's path."""
    built = compiled(spec, overrides, templates)
    return built.spec, built.script


@commands.command(short_help="Print the sbatch script for a job spec (no cluster).")
def render(
    spec: SpecArg,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE", help="Write the script here (atomically); - for stdout."),
    ] = None,
    set_: SetOpt = None,
    templates: TemplatesOpt = None,
    cluster: ClusterOpt = None,
    args: ArgsArg = None,
) -> None:
    """Print the sbatch script for a job spec (no cluster needed). With --cluster, stderr first lists every
    field given and where it came from (the profile, the spec or --set). Words after `--` go after the command."""
    built = compiled(spec, set_ or [], templates, cluster, tuple(args or ()))
    if built.origins:
        from slurmgen.spec.secrets import MASK, looks_like_token

        for field, value, origin in built.origins:
            # the table goes to the terminal as the script does: a token-like literal is masked in both
            shown = MASK if isinstance(value, str) and looks_like_token(value) else json.dumps(value)
            err(f"{field} = {shown}    ({origin})")
    text = built.script
    if built.spec.sweep is not None:
        from slurmgen.cli.sweep_commands import render_lines

        for line in render_lines(built.spec):
            err(line)
    if output is None or str(output) in STANDARD_OUTPUT:
        if built.spec.env:  # only an env value can be a token
            from slurmgen.script.directives import sq
            from slurmgen.spec.secrets import mask

            text = mask(text, built.spec.env, sq)  # what a terminal or a CI log shows: no token
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from slurmgen.cli.output_file import write_output

    write_output("-o", output, text, "job.sbatch", stdout_hint=True)  # as `slurmgen render x.yaml > FILE` would
    err(f"wrote {output}")


@commands.command(short_help="Check specs and report every problem of each.")
def validate(
    specs: Annotated[list[Path], typer.Argument(metavar="SPEC...", help="Job specs to check.", show_default=False)],
    set_: SetOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    cluster: ClusterOpt = None,
) -> None:
    """Check many specs at once and report every problem of every file, in the order given."""
    from slurmgen.script.build import check_file, note_line

    problems: list[Problem] = []
    for path in specs:
        try:
            checked = check_file(path, set_ or [], Path.cwd(), cluster_profile(cluster, path))
        except SpecError as exc:
            problems.extend(exc.problems)
            for problem in exc.problems:
                err(f"error: {problem}")
            continue
        warnings = list(checked.warnings)
        refused = strict and bool(warnings)
        if refused:
            problems.extend(warnings)
            for problem in warnings:
                err(f"error: {problem} (--strict)")
        else:
            warn_all(warnings)
        for note in checked.notes:  # said, never counted: --strict fails on warnings, not on a choice explained
            err(note_line(note))
        if not refused:
            err(f"ok: {path}")
    if problems:
        raise typer.Exit(SpecError(problems).exit_code)


@commands.command(short_help="Print the JSON Schema of the job spec, for editors.")
def schema() -> None:
    """Print the JSON Schema of the job spec (for editors: completion and checks in jobs/*.yaml)."""
    from slurmgen.spec.fields import json_schema

    print(json.dumps(json_schema(), indent=2))
