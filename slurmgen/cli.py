"""The command line. The only place that prints and exits; library code raises slurmgen.errors.

Human messages go to stderr, results (a script, a job id, a table) to stdout, so `JOB=$(slurmgen submit ...)`
and `slurmgen render x.yaml > x.sbatch` work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from slurmgen.cli_fast import err, render_action, report, warn_all
from slurmgen.cli_jobs import jobs as jobs_app
from slurmgen.cli_options import SetOpt, TemplatesOpt
from slurmgen.errors import Problem, SlurmgenError, SpecError

app = typer.Typer(
    name="slurmgen",
    help="YAML job specs to SLURM batch scripts: render, validate, submit, requeue, and run locally.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.command()
def render(
    spec: Annotated[Path, typer.Argument(help="The job spec (YAML).", show_default=False)],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the script here (atomically).")] = None,
    set_: SetOpt = None,
    templates: TemplatesOpt = None,
) -> None:
    """Print the sbatch script for a job spec (no cluster needed)."""
    render_action(spec, output, set_ or [], templates)


@app.command()
def validate(
    specs: Annotated[list[Path], typer.Argument(help="Job specs to check.", show_default=False)],
    set_: SetOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
) -> None:
    """Check many specs at once and report every problem of every file."""
    from slurmgen.spec import load_file

    problems: list[Problem] = []
    warned = False
    for path in specs:
        try:
            loaded = load_file(path, set_ or [])
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        warn_all(loaded.warnings)
        warned = warned or bool(loaded.warnings)
        err(f"ok: {path}")
    if problems:
        raise SpecError(problems)
    if strict and warned:
        err("error: warnings present and --strict given")
        raise typer.Exit(2)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the job spec (for editors: completion and checks in jobs/*.yaml)."""
    from slurmgen.spec_fields import json_schema

    print(json.dumps(json_schema(), indent=2))


@app.command("run")
def run_(
    spec: Annotated[Path | None, typer.Argument(help="The job spec (YAML).", show_default=False)] = None,
    local: Annotated[bool, typer.Option("--local", help="Run on this machine (required for now).")] = False,
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="Emulated nodes (--set nodes=N).")] = None,
    tasks_per_node: Annotated[
        int | None, typer.Option("--tasks-per-node", help="Ranks per node (tasks_per_node; torchrun: nproc_per_node).")
    ] = None,
    set_: SetOpt = None,
    preempt_after: Annotated[
        float | None,
        typer.Option(
            "--preempt-after", metavar="SECONDS", help="Send the preemption signal at SECONDS of the first run."
        ),
    ] = None,
    templates: TemplatesOpt = None,
    job: Annotated[str | None, typer.Option("--job", help="With --signal: the running local job's id.")] = None,
    signal: Annotated[
        str | None, typer.Option("--signal", metavar="SIG", help="Deliver SIG to a running local job (--job).")
    ] = None,
) -> None:
    """Run a job spec end to end on this machine: the real script, emulated nodes, signals and requeues."""
    from slurmgen.local.command import command
    from slurmgen.local.plan import Options

    opts = Options(
        nodes, tasks_per_node, tuple(set_ or []), preempt_after, None if templates is None else str(templates)
    )
    raise typer.Exit(command(spec, local, job, signal, opts, err))


app.add_typer(jobs_app)  # submit, requeue, status, logs, cancel (slurmgen/cli_jobs.py)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; the single error boundary. Returns the exit code."""
    try:
        # Without standalone mode click does not raise typer.Exit out of a command: it returns its exit code.
        code = app(args=argv, standalone_mode=False)
    except SlurmgenError as exc:
        return report(exc)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        err("aborted")
        return 130
    except KeyboardInterrupt:
        err("interrupted")
        return 130
    except typer.TyperException as exc:  # usage errors (unknown option, missing argument)
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            err(f"error: {exc.format_message()}")
        return exc.exit_code
    return code if isinstance(code, int) else 0
