"""The Typer application and the CLI's one error boundary.

Human messages go to stderr, results (a script, a job id, a table) to stdout, so `JOB=$(slurmgen submit ...)`
and `slurmgen render x.yaml > x.sbatch` work. Library code raises slurmgen.errors; `main` turns them into one
line and an exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from difflib import get_close_matches
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand, TyperGroup

from slurmgen.cli.output import err, report
from slurmgen.errors import SlurmgenError

if TYPE_CHECKING:
    from typer._click import (
        Command,
        Context,
    )  # typer carries its own click (typer/_click); the top-level click is not it

# Each command's module under slurmgen.cli is imported, and its command made into a click command, only when that
# command runs or help lists it: typer turns a command's signature into click parameters at every start, some
# milliseconds each, so a `slurmgen render` that built all fourteen was slower than one that builds its own. Each
# loader below imports its module by a plain import statement and is named after it.


def spec_commands() -> typer.Typer:
    from slurmgen.cli import spec_commands as module

    return module.commands


def job_commands() -> typer.Typer:
    from slurmgen.cli import job_commands as module

    return module.commands


def local_commands() -> typer.Typer:
    from slurmgen.cli import local_commands as module

    return module.commands


def site_commands() -> typer.Typer:
    from slurmgen.cli import site_commands as module

    return module.commands


def sweep_commands() -> typer.Typer:
    from slurmgen.cli import sweep_commands as module

    return module.commands


def report_commands() -> typer.Typer:
    from slurmgen.cli import report_commands as module

    return module.commands


# Each command and the loader of the module that defines it, in the order `slurmgen --help` lists them.
# tests/cli/test_cli_commands.py checks this table against the modules.
COMMANDS: dict[str, Callable[[], typer.Typer]] = {
    "render": spec_commands,
    "validate": spec_commands,
    "schema": spec_commands,
    "submit": job_commands,
    "requeue": job_commands,
    "resume": job_commands,
    "status": job_commands,
    "logs": job_commands,
    "cancel": job_commands,
    "run": local_commands,
    "doctor": site_commands,
    "history": site_commands,
    "resubmit": sweep_commands,
    "report": report_commands,
}


class PlainUsageCommand(TyperCommand):
    """Usage lines with plain metavars, as man pages write them: `slurmgen render [OPTIONS] SPEC`. Typer puts a
    required argument in braces (`{SPEC}`, typer/core.py TyperArgument.make_metavar), which reads as a choice."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


class SlurmgenGroup(TyperGroup):
    """The root group: it loads each command when asked for it (COMMANDS), and every command it hands out prints
    its usage with plain metavars."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = self.commands[cmd_name] = load_command(cmd_name)
        if type(command) is TyperCommand:
            command.__class__ = PlainUsageCommand  # the same object, one method more; typer has no per-app default
        return command

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        """An unknown command's error names the close ones among every command, loaded or not (typer's own
        suggestion looks only at the commands loaded so far: TyperGroup.resolve_command reads self.commands)."""
        name = args[0] if args else None
        if name is not None and name not in COMMANDS and not name.startswith("-") and not ctx.resilient_parsing:
            matches = get_close_matches(name, list(COMMANDS))
            hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
            ctx.fail(f"No such command {name!r}.{hint}")  # click's own words (click.Group.resolve_command)
        return super().resolve_command(ctx, args)


def load_command(name: str) -> Command:
    """The click command of COMMANDS[name], made as typer makes the commands of an app added with add_typer
    (typer.main.get_command_from_info and get_command_name, the functions typer's own get_command calls for each
    command of an app)."""
    import typer.main

    loader = COMMANDS[name]
    commands = loader()
    for info in commands.registered_commands:
        assert info.callback is not None
        if (info.name or typer.main.get_command_name(info.callback.__name__)) == name:
            return typer.main.get_command_from_info(
                info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
            )
    raise LookupError(f"slurmgen.cli.{loader.__name__} defines no command {name!r}")


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
