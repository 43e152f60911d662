"""The Typer application and the CLI's one error boundary.

Human messages go to stderr, results (a script, a job id, a table) to stdout, so `JOB=$(slurmgen submit ...)`
and `slurmgen render x.yaml > x.sbatch` work. Library code raises slurmgen.errors; `main` turns them into one
line and an exit code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand, TyperGroup

from slurmgen.cli import job_commands, local_commands, report_commands, site_commands, spec_commands, sweep_commands
from slurmgen.cli.output import err, report
from slurmgen.errors import SlurmgenError

if TYPE_CHECKING:
    from typer._click import (
        Command,
        Context,
    )  # typer carries its own click (typer/_click); the top-level click is not it


class PlainUsageCommand(TyperCommand):
    """Usage lines with plain metavars, as man pages write them: `slurmgen render [OPTIONS] SPEC`. Typer puts a
    required argument in braces (`{SPEC}`, typer/core.py TyperArgument.make_metavar), which reads as a choice."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


class SlurmgenGroup(TyperGroup):
    """The root group: every command it hands out prints its usage with plain metavars."""

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        command = super().get_command(ctx, cmd_name)
        if type(command) is TyperCommand:
            command.__class__ = PlainUsageCommand  # the same object, one method more; typer has no per-app default
        return command


app = typer.Typer(
    name="slurmgen",
    cls=SlurmgenGroup,
    help="YAML job specs to SLURM batch scripts: render, validate, submit, requeue, and run locally.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from slurmgen import __version__

        print(f"slurmgen {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """YAML job specs to SLURM batch scripts: render, validate, submit, requeue, and run locally."""


app.add_typer(spec_commands.commands)  # render, validate, schema
app.add_typer(job_commands.commands)  # submit, requeue, status, logs, cancel
app.add_typer(local_commands.commands)  # run
app.add_typer(site_commands.commands)  # doctor, history
app.add_typer(sweep_commands.commands)  # resubmit
app.add_typer(report_commands.commands)  # report


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; the single error boundary. Returns the exit code."""
    try:
        # Without standalone mode click does not raise typer.Exit out of a command: it returns its exit code.
        code = app(args=argv, prog_name="slurmgen", standalone_mode=False)
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
