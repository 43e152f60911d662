"""`slurmgen run`: the rendered script on this machine, with Slurm emulated around it (slurmgen.local)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slurmgen.cli.options import ArgsArg, ClusterOpt, SetOpt, TemplatesOpt
from slurmgen.cli.output import err

commands = typer.Typer()


@commands.command("run", short_help="Run a job spec end to end on this machine.")
def run_local(
    spec: Annotated[
        Path | None, typer.Argument(metavar="SPEC", help="The job spec (YAML).", show_default=False)
    ] = None,
    local: Annotated[
        bool, typer.Option("--local", hidden=True, help="Run on this machine (the only mode; still accepted).")
    ] = True,
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
    kill_rank: Annotated[
        int | None,
        typer.Option("--kill-rank", metavar="R", help="Rehearse a crash: SIGKILL rank R's program (with --after)."),
    ] = None,
    hang_rank: Annotated[
        int | None,
        typer.Option("--hang-rank", metavar="R", help="Rehearse a hang: SIGSTOP rank R's program (with --after)."),
    ] = None,
    bad_node: Annotated[
        int | None,
        typer.Option(
            "--bad-node", metavar="N", help="Rehearse a bad node: emulated node N (1 is the first) fails its checks."
        ),
    ] = None,
    after: Annotated[
        float | None,
        typer.Option(
            "--after", metavar="SECONDS", help="With --kill-rank or --hang-rank: at SECONDS of the first run."
        ),
    ] = None,
    templates: TemplatesOpt = None,
    job: Annotated[
        str | None, typer.Option("--job", metavar="ID", help="With --signal: a running local job (local-N).")
    ] = None,
    signal: Annotated[
        str | None, typer.Option("--signal", metavar="SIG", help="Deliver SIG to a running local job (--job).")
    ] = None,
    cluster: ClusterOpt = None,
    args: ArgsArg = None,
) -> None:
    """Run a job spec end to end on this machine: the real script, emulated nodes, signals and requeues. Words
    after `--` go after the spec's command."""
    from slurmgen.cli.spec_commands import cluster_profile
    from slurmgen.errors import UsageError
    from slurmgen.local.command import command
    from slurmgen.local.setup import Options

    if kill_rank is not None and hang_rank is not None:
        raise UsageError("--kill-rank and --hang-rank: rehearse one failure at a time")
    what, rank = ("kill", kill_rank) if kill_rank is not None else ("hang", hang_rank)
    if (rank is None) != (after is None):
        raise UsageError(f"--{what}-rank R and --after SECONDS go together, e.g. --{what}-rank 1 --after 30")
    rehearse = None if rank is None or after is None else (what, rank, after)
    opts = Options(
        nodes,
        tasks_per_node,
        tuple(set_ or []),
        preempt_after,
        None if templates is None else str(templates),
        rehearse,
        bad_node,
        None if cluster is None or spec is None else cluster_profile(cluster, spec),  # its defaults, run here
        tuple(args or ()),
    )
    raise typer.Exit(command(spec, job, signal, opts, err))
