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

from slurmgen.cli.options import ClusterOpt, JobArg, PointOpt, SetOpt, SpecArg, TemplatesOpt
from slurmgen.cli.output import err
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle, Report
    from slurmgen.slurm.client import JobInfo, SlurmClient
    from slurmgen.submission.plan import Plan

commands = typer.Typer()


def planned(spec: Path, overrides: list[str], templates: Path | None, base: Path) -> Plan:
    """Validate, render (warnings on stderr) and plan a submission recorded under ``base``."""
    from slurmgen.api.compiling import SpecSource
    from slurmgen.api.submitting import planned as api_planned

    return api_planned(SpecSource(spec, tuple(overrides)), templates, base, err)


def submit_spec(spec: Path, overrides: list[str], templates: Path | None, single: bool = False) -> str:
    """Submit a spec (one job or a sweep) through the API's path (slurmgen.submit's): warnings and a summary on
    stderr, the id that status/logs/cancel take alone on stdout; that id."""
    from slurmgen.api.submitting import submit_any
    from slurmgen.journal import home

    base = home()
    p = planned(spec, overrides, templates, base)
    done = submit_any(p, base, err, single="--wait follows one job; follow a sweep with `slurmgen status SWEEP`"
                      if single else None)  # fmt: skip
    err(done.message)
    print(done.label, flush=True)
    return done.label


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
def submit_command(
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
) -> None:
    """Validate, render and submit a job; print its id alone on stdout."""
    if cluster is not None:
        _submit_to_cluster(spec, list(set_ or []), templates, cluster, no_snapshot, dry_run or test_only or wait)
        return
    if dry_run and (test_only or wait):
        raise UsageError("--dry-run submits nothing: it cannot be combined with --test-only or --wait")
    if test_only and wait:
        raise UsageError("--test-only submits nothing, so there is nothing to --wait for")
    overrides = list(set_ or [])
    if wait:
        _submit_and_wait(spec, overrides, templates)
    if not (dry_run or test_only):
        submit_spec(spec, overrides, templates)
        return
    from slurmgen.api.submitting import dry_run_report
    from slurmgen.journal import home

    p = planned(spec, overrides, templates, home())
    if dry_run:
        from slurmgen.script.directives import sq
        from slurmgen.spec.secrets import mask

        sys.stdout.write(mask(p.script, p.spec.env, sq))  # what a terminal or a CI log shows: no token
        for line in dry_run_report(p, err):
            err(line)
        return
    from slurmgen.backends.slurm_here.sbatch import would_run
    from slurmgen.slurm.client import SlurmClient

    result = would_run(p, SlurmClient())
    start = result.start.isoformat(sep=" ") if result.start else "an unknown time"
    print(
        f"job {p.spec.name} can run: it would start at {start} on {result.nodes} "
        f"(partition {result.partition}, {result.processors} processors)"
    )


def _submit_to_cluster(
    spec: Path, overrides: list[str], templates: Path | None, cluster: str, no_snapshot: bool, other: bool
) -> None:
    """`submit --cluster NAME`: over ssh to the profile's host; a profile without host is this machine, where the
    submission is the usual one with the profile's defaults under the spec."""
    import json

    from slurmgen.api.compiling import SpecSource
    from slurmgen.api.submitting import submit_any, submit_remote_source
    from slurmgen.cli.spec_commands import cluster_profile
    from slurmgen.journal import home

    profile = cluster_profile(cluster, spec)
    assert profile is not None
    source = SpecSource(spec, tuple(overrides), profile)
    if profile.host is None:
        from slurmgen.api.submitting import planned as api_planned

        done = submit_any(api_planned(source, templates, home(), err), home(), err)
    else:
        if other:
            raise UsageError(
                "--cluster with a host submits over ssh: --dry-run, --test-only and --wait are not there yet"
            )
        code_dir = None
        if no_snapshot:
            chdir = [o.partition("=")[2] for o in overrides if o.partition("=")[0].strip() == "chdir"]
            code_dir = json.loads(chdir[-1]) if chdir and chdir[-1].startswith('"') else (chdir[-1] if chdir else None)
        done = submit_remote_source(source, templates, err, snapshot=not no_snapshot, code_dir=code_dir)
    err(done.message)
    print(done.label, flush=True)


def _submit_and_wait(spec: Path, overrides: list[str], templates: Path | None) -> None:
    """Submit, follow the job to its end and exit with its code; slurmgen's own failures exit 125 (wait.py)."""
    from slurmgen.cli.output import report
    from slurmgen.errors import SlurmgenError
    from slurmgen.exit_codes import EXIT_WAIT_ERROR
    from slurmgen.queries.wait import result_line
    from slurmgen.slurm.client import SlurmClient

    job = ""
    try:
        job = submit_spec(spec, overrides, templates, single=True)
        _wait(SlurmClient(), job)
    except SlurmgenError as exc:
        report(exc)
        err(f"slurmgen: exiting {EXIT_WAIT_ERROR}: slurmgen or Slurm failed, not the job (see the line above)")
        print(result_line(job, "ERROR", EXIT_WAIT_ERROR), flush=True)
        raise typer.Exit(EXIT_WAIT_ERROR) from None


def _wait(client: SlurmClient, job: str) -> None:
    from slurmgen.journal import Journal, find, find_home
    from slurmgen.queries.history import last_failing
    from slurmgen.queries.wait import follow, result_line
    from slurmgen.slurm.ids import parse_job_id
    from slurmgen.submission.targets import Target

    progress = Progress()
    target = Target(parse_job_id(job), find(Journal(find_home()).jobs(), job))  # the job just submitted
    try:
        result = follow(client, target.job, progress)
    except KeyboardInterrupt:
        progress.close()
        err(f"stopped waiting; job {job} goes on (slurmgen status {job}, slurmgen cancel {job})")
        raise typer.Exit(130) from None
    progress.close()
    failing = last_failing(target, client.show_jobs(target.job)) if result.exit_code else None
    err(f"slurmgen: {result.message}" + (f"; {failing} failed first" if failing else ""))
    print(result_line(result.job or job, result.state, result.exit_code, failing), flush=True)
    raise typer.Exit(result.exit_code)


class Progress:
    """The --wait display on stderr: a line per change, or one line rewritten in place on a terminal."""

    def __init__(self) -> None:
        import time

        self.tty = sys.stderr.isatty()
        self.last = ""
        self.clock = time.monotonic
        self.start = self.clock()

    def __call__(self, infos: list[JobInfo]) -> None:
        from slurmgen.queries.wait import describe
        from slurmgen.slurm.times import format_duration

        line = describe(infos)
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
    from slurmgen.queries import logs as lg
    from slurmgen.queries.log_reading import check_choice, failed_first, write_logs

    check_choice(rank, node)
    chosen = handle(job, point)
    if failed:
        if rank is not None or node is not None:
            raise UsageError("--failed picks the rank itself: leave out --rank and --node")
        rank, line = failed_first(chosen, job)
        err(f"slurmgen: {line}")
    view = chosen.logs(rank, node)
    if not follow_:
        if not write_logs(view, _write_bytes):  # streamed: a log of any size, little memory
            err(f"{view.missing()} Nothing to print yet.")
        return
    follower = lg.Follower(out=_write_bytes, cwd=Path.cwd())
    if not view.files():
        err(view.missing() + " Waiting for them...")
    lg.follow(view.files, view.ended, follower, state_poll=view.poll)


def _write_bytes(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


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
