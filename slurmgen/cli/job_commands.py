"""The job commands: submit, requeue, resume, status, logs, cancel. Thin: parse, call a module, print, exit.

Every command on an existing job asks a handle of the job interface (slurmgen.backends.interface), whatever the job is
(a Slurm job, a job run here, a sweep or one point of it), and never looks at its kind: tests/cli checks that.

Results (a job id, a table, log text) go to stdout and human messages to stderr, so `JOB=$(slurmgen submit x.yaml)`
works. Errors are raised and printed once by slurmgen.cli.app.main. Imports are inside the commands: the CLI's start-up
must not pay for what another command needs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurmgen.cli.options import ArgsArg, ClusterOpt, JobArg, PointOpt, SetOpt, SpecArg, TemplatesOpt
from slurmgen.cli.output import err
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import Backend, JobHandle, Report, Request

commands = typer.Typer()


def handle(text: str, point: int | None = None) -> JobHandle:
    """The job, sweep or sweep point a JOB argument (and --point) names, whatever its kind; notes on stderr."""
    from slurmgen.backends.registry import handle_of

    found = handle_of(text)
    for note in found.notes:
        err(note)
    return found if point is None else found.point(point)


def show(report: Report) -> None:
    """Print what a handle said: its results on stdout, its messages on stderr; exit with its code."""
    for line in report.out:
        print(line, flush=True)
    for line in report.notes:
        err(line)
    if report.code:
        raise typer.Exit(report.code)


@commands.command("submit", short_help="Validate, render and submit a job; print its id.")
def on_submit(
    spec: SpecArg,
    set_: SetOpt = None,
    templates: TemplatesOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the script and the sbatch command only.")] = False,
    test_only: Annotated[
        bool, typer.Option("--test-only", help="Ask the scheduler whether and when the job could run; submit nothing.")
    ] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Follow the job to its end; exit with its exit code.")] = False,
    cluster: ClusterOpt = None,
    no_snapshot: Annotated[
        bool, typer.Option("--no-snapshot", help="With --cluster: run in --set chdir=DIR, already on the cluster.")
    ] = False,
    no_check: Annotated[
        bool,
        typer.Option("--no-check", help="Submit without asking the spec's python for its version first."),
    ] = False,
    args: ArgsArg = None,
) -> None:
    """Validate, render and submit a job; print its id alone on stdout. Words after `--` go after the spec's
    command: `slurmgen submit job.yaml -- --lr 3e-4`."""
    from slurmgen.backends.interface import Request, unsupported
    from slurmgen.backends.registry import backend_for
    from slurmgen.submission.source import SpecSource

    overrides = list(set_ or [])
    profile = None
    if cluster is not None:
        from slurmgen.cli.spec_commands import cluster_profile

        profile = cluster_profile(cluster, spec)
    backend = backend_for(profile)
    for asked, question in ((dry_run, "dry_run"), (test_only, "would_run"), (wait, "follow")):
        if asked and question in backend.cannot:
            raise unsupported(backend, question)
    if dry_run and (test_only or wait):
        raise UsageError("--dry-run submits nothing: it cannot be combined with --test-only or --wait")
    if test_only and wait:
        raise UsageError("--test-only submits nothing, so there is nothing to --wait for")
    source = SpecSource(spec, tuple(overrides), profile, tuple(args or ()))
    request = Request(source, templates, _code_dir(overrides), not no_snapshot, check=not no_check)
    if wait:
        _submit_and_wait(backend, request)
    if dry_run:
        shown = backend.dry_run(request, err)
        sys.stdout.write(shown.script)
        for line in shown.lines:
            err(line)
        return
    if test_only:
        print(backend.would_run(request, err))
        return
    done = backend.launch(request, err)
    err(done.message)
    print(done.label, flush=True)


def _code_dir(overrides: list[str]) -> str | None:
    """Where the code is when it is not shipped (`--no-snapshot`): --set chdir=DIR, the last one given."""
    import json

    chdir = [o.partition("=")[2] for o in overrides if o.partition("=")[0].strip() == "chdir"]
    return str(json.loads(chdir[-1])) if chdir and chdir[-1].startswith('"') else (chdir[-1] if chdir else None)


def _submit_and_wait(backend: Backend, request: Request) -> None:
    """Submit, follow the job to its end and exit with its code; slurmgen's own failures exit 125 (wait.py)."""
    from slurmgen.backends.interface import Request
    from slurmgen.cli.output import report
    from slurmgen.errors import SlurmgenError
    from slurmgen.exit_codes import EXIT_WAIT_ERROR
    from slurmgen.queries.wait import result_line

    job = ""
    try:
        one = Request(request.source, request.templates, request.code_dir, request.snapshot,
                      one="--wait follows one job; follow a sweep with `slurmgen status SWEEP`",
                      check=request.check)  # fmt: skip
        done = backend.launch(one, err)
        err(done.message)
        job = done.label
        print(job, flush=True)
        _wait(backend, job)
    except SlurmgenError as exc:
        report(exc)
        err(f"slurmgen: exiting {EXIT_WAIT_ERROR}: slurmgen or Slurm failed, not the job (see the line above)")
        print(result_line(job, "ERROR", EXIT_WAIT_ERROR), flush=True)
        raise typer.Exit(EXIT_WAIT_ERROR) from None


def _wait(backend: Backend, job: str) -> None:
    from slurmgen.queries.wait import result_line

    progress = Progress()
    try:
        result = backend.follow(job, progress)
    except KeyboardInterrupt:
        progress.close()
        err(f"stopped waiting; job {job} goes on (slurmgen status {job}, slurmgen cancel {job})")
        raise typer.Exit(130) from None
    progress.close()
    failing = result.failing
    err(f"slurmgen: {result.message}" + (f"; {failing} failed first" if failing else ""))
    print(result_line(result.job, result.state, result.exit_code, failing), flush=True)
    raise typer.Exit(result.exit_code)


class Progress:
    """The --wait display on stderr: a line per change, or one line rewritten in place on a terminal."""

    def __init__(self) -> None:
        import time

        self.tty = sys.stderr.isatty()
        self.last = ""
        self.clock = time.monotonic
        self.start = self.clock()

    def __call__(self, line: str) -> None:
        from slurmgen.slurm.times import format_duration

        if self.tty:
            sys.stderr.write(f"\r\x1b[K[{format_duration(int(self.clock() - self.start))}] {line}")
            sys.stderr.flush()
        elif line != self.last:
            err(f"slurmgen: {line}")
        self.last = line

    def close(self) -> None:
        if self.tty and self.last:
            sys.stderr.write("\n")


@commands.command("requeue", short_help="Requeue a running job: it restarts with the same id.")
def requeue_command(
    job: JobArg,
    hold: Annotated[bool, typer.Option("--hold", help="Requeue and hold (scontrol requeuehold).")] = False,
    finished: Annotated[bool, typer.Option("--finished", help="Also requeue a job that already ended.")] = False,
) -> None:
    """Requeue a running job: it restarts from the top of its script with the same id."""
    show(handle(job).requeue(hold, finished))


@commands.command("resume", short_help="Bring back a job that ended before its work was done.")
def resume_command(job: JobArg) -> None:
    """Bring back a job that ended before its work was done (cancelled, preempted, timed out), from its last
    saved state: requeued while Slurm knows it, else its script submitted again."""
    show(handle(job).resume(err))


@commands.command("status", short_help="A table of job states: one job, or the recent jobs.")
def status_command(
    job: Annotated[str | None, typer.Argument(metavar="JOB", help="A job id or spec; default: recent jobs.")] = None,
) -> None:
    """A table of job states: one job (or array, or sweep), or the recent jobs of the journal."""
    from slurmgen.backends.registry import recent

    show(recent() if job is None else handle(job).status())


@commands.command("logs", short_help="Print a job's batch, node and rank logs.")
def logs_command(
    job: JobArg,
    follow_: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
    node: Annotated[str | None, typer.Option("--node", metavar="NODE", help="Only this node's log.")] = None,
    rank: Annotated[
        int | None, typer.Option("--rank", metavar="N", min=0, help="Only what rank N's program printed.")
    ] = None,
    failed: Annotated[
        bool,
        typer.Option(
            "--failed",
            help="Only the log of the rank that failed first on its own (not a rank that died of it), in the last "
            "run that had one; found in the run history, without reading every rank's log.",
        ),
    ] = False,
    point: PointOpt = None,
) -> None:
    """Print the batch log, the per-node logs and the ranks' logs of a job (all requeued runs: they are appended).
    A job with no log yet (still pending) prints nothing, and says so on stderr."""
    from slurmgen.backends.log_reading import check_choice, failed_first, write_logs
    from slurmgen.queries import logs as lg

    check_choice(rank, node)
    chosen = handle(job, point)
    if failed:
        if rank is not None or node is not None:
            raise UsageError("--failed picks the rank itself: leave out --rank and --node")
        rank, line = failed_first(chosen, job)
        err(f"slurmgen: {line}")
    view = chosen.logs(rank, node)
    out = _write_escaped if view.escape else _write_bytes
    if not follow_:
        if not write_logs(view, out):  # streamed: a log of any size, little memory
            err(f"{view.missing()} Nothing to print yet.")
        return
    follower = lg.Follower(out=out, cwd=Path.cwd())
    if not view.files():
        err(view.missing() + " Waiting for them...")
    lg.follow(view.files, view.ended, follower, state_poll=view.poll)


def _write_bytes(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _write_escaped(data: bytes) -> None:
    from slurmgen.printable import printable_bytes

    _write_bytes(printable_bytes(data))


# scancel(1): --batch, the default, --full.
TO_CHOICES = (
    "batch (the batch shell only; a slurmgen script passes it on to every task, even before they start), "
    "steps (the tasks of the running steps only, as scancel does by default) or all (the batch shell and every "
    "task directly)"
)


@commands.command("cancel", short_help="Cancel a job, or send it a signal.")
def cancel_command(
    job: JobArg,
    signal: Annotated[
        str | None, typer.Option("--signal", metavar="SIG", help="Send SIG instead of cancelling (e.g. USR2).")
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="WHO",
            help=f"Who gets --signal: {TO_CHOICES}. Default: batch for the signals a slurmgen job's script traps "
            "(TERM, USR2, its preemption signal), else steps.",
        ),
    ] = None,
    point: PointOpt = None,
) -> None:
    """Cancel a job, or send it a signal (USR2: a clean exit, without scancel's kill timer). A sweep: every array
    of it, or one point with --point."""
    if to is not None and to not in ("batch", "steps", "all"):
        raise UsageError(f"--to {to}: choose {TO_CHOICES}")
    if to is not None and signal is None:
        raise UsageError("--to needs --signal")
    show(handle(job, point).cancel(signal, to))
