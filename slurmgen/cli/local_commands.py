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
    preempt_at_step: Annotated[
        int | None,
        typer.Option(
            "--preempt-at-step",
            metavar="N",
            help="Send the preemption signal once rank 0's program is at step N of the first run.",
        ),
    ] = None,
    kill_rank: Annotated[
        int | None,
        typer.Option(
            "--kill-rank", metavar="R", help="Rehearse a crash: SIGKILL rank R's program (with --after or --at-step)."
        ),
    ] = None,
    hang_rank: Annotated[
        int | None,
        typer.Option(
            "--hang-rank", metavar="R", help="Rehearse a hang: SIGSTOP rank R's program (with --after or --at-step)."
        ),
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
    at_step: Annotated[
        int | None,
        typer.Option(
            "--at-step", metavar="N", help="With --kill-rank or --hang-rank: once rank 0's program is at step N."
        ),
    ] = None,
    step_wait: Annotated[
        float | None,
        typer.Option(
            "--step-wait",
            metavar="SECONDS",
            help="How long --at-step and --preempt-at-step wait for their step from the run's start (default 600).",
            show_default=False,
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
    from slurmgen.local.step_watch import DEFAULT_WAIT

    if kill_rank is not None and hang_rank is not None:
        raise UsageError("--kill-rank and --hang-rank: rehearse one failure at a time")
    if preempt_after is not None and preempt_at_step is not None:
        raise UsageError("--preempt-after and --preempt-at-step: one moment for the preemption, a second or a step")
    what, rank = ("kill", kill_rank) if kill_rank is not None else ("hang", hang_rank)
    if after is not None and at_step is not None:
        raise UsageError(f"--after and --at-step: one moment for the {what} rehearsal, a second or a step")
    when = after if at_step is None else at_step
    if rank is None and when is not None:
        given = "--after" if at_step is None else "--at-step"
        raise UsageError(f"{given} goes with --kill-rank R or --hang-rank R, e.g. --kill-rank 1 {given} 30")
    if rank is not None and when is None:
        raise UsageError(f"--{what}-rank R goes with --after SECONDS or --at-step N, e.g. --{what}-rank 1 --after 30")
    rehearse = None if rank is None or when is None else (what, rank, after)
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
        preempt_at_step=preempt_at_step,
        rehearse_at_step=at_step,
        step_wait=DEFAULT_WAIT if step_wait is None else step_wait,
    )
    raise typer.Exit(command(spec, job, signal, opts, err))
