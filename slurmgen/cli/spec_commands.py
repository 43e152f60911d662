"""`slurmgen render`, `validate` and `schema`: the commands that need no cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurmgen.cli.options import ArgsArg, ClusterOpt, SetOpt, SpecArg, TemplatesOpt
from slurmgen.cli.output import err, warn_all
from slurmgen.errors import Problem, SpecError, UsageError

if TYPE_CHECKING:
    from slurmgen.script.build import Build
    from slurmgen.spec.model import JobSpec
    from slurmgen.spec.profile import ClusterProfile

commands = typer.Typer()


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
    for field, value, origin in built.origins:
        err(f"{field} = {json.dumps(value)}    ({origin})")
    text = built.script
    if built.spec.sweep is not None:
        from slurmgen.cli.sweep_commands import render_lines

        for line in render_lines(built.spec):
            err(line)
    if output is None or str(output) == "-":
        if built.spec.env:  # only an env value can be a token
            from slurmgen.script.directives import sq
            from slurmgen.spec.secrets import mask

            text = mask(text, built.spec.env, sq)  # what a terminal or a CI log shows: no token
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from slurmgen.atomic import shell_mode, write_text

    if output.is_dir():
        raise UsageError(f"-o {output}: is a directory; give a file name, e.g. -o {output / 'job.sbatch'}")
    if (kind := _not_regular(output)) is not None:
        # The atomic write renames a new file over the path: a device (-o /dev/null as root), a FIFO or
        # /proc/self/fd/1 would be replaced by a regular file instead of written to.
        raise UsageError(f"-o {output}: is {kind}, not a regular file; give a file name, or -o - for standard output")
    try:
        write_text(output, text, mode=shell_mode(output))  # as `slurmgen render x.yaml > FILE` would
    except OSError as exc:
        raise UsageError(
            f"-o {output}: cannot write it ({exc.strerror or exc}); check that the directory exists"
        ) from None
    err(f"wrote {output}")


def _not_regular(path: Path) -> str | None:
    """What `path` is when it exists and is not a regular file (after links), else None."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    kinds = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device", stat.S_ISFIFO: "a FIFO",
             stat.S_ISSOCK: "a socket"}  # fmt: skip
    return None if stat.S_ISREG(mode) else next((k for test, k in kinds.items() if test(mode)), "not a file")


@commands.command(short_help="Check specs and report every problem of each.")
def validate(
    specs: Annotated[list[Path], typer.Argument(metavar="SPEC...", help="Job specs to check.", show_default=False)],
    set_: SetOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    cluster: ClusterOpt = None,
) -> None:
    """Check many specs at once and report every problem of every file, in the order given."""
    from slurmgen.script.build import check_file

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
        if strict and warnings:
            problems.extend(warnings)
            for problem in warnings:
                err(f"error: {problem} (--strict)")
            continue
        warn_all(warnings)
        err(f"ok: {path}")
    if problems:
        raise typer.Exit(SpecError(problems).exit_code)


@commands.command(short_help="Print the JSON Schema of the job spec, for editors.")
def schema() -> None:
    """Print the JSON Schema of the job spec (for editors: completion and checks in jobs/*.yaml)."""
    from slurmgen.spec.fields import json_schema

    print(json.dumps(json_schema(), indent=2))
