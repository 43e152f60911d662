"""The job commands: submit, requeue, status, logs, cancel. Thin: parse, call a module, print, exit.

Results (a job id, a table, log text) go to stdout and human messages to stderr, so `JOB=$(slurmgen submit x.yaml)`
works. Errors are raised and printed once by slurmgen.cli.app.main. Imports are inside the commands: the CLI's start-up
must not pay for what another command needs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurmgen.cli.options import JobArg, PointOpt, SetOpt, SpecArg, TemplatesOpt
from slurmgen.cli.output import err
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.api.job import Job
    from slurmgen.jobs.plan import Plan
    from slurmgen.jobs.submit import Submission
    from slurmgen.jobs.targets import Target
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.showjob import JobInfo

commands = typer.Typer()


def planned(spec: Path, overrides: list[str], templates: Path | None, base: Path) -> Plan:
    """Validate, render (warnings on stderr) and plan a submission recorded under ``base``."""
    from slurmgen.api.submitting import SpecSource
    from slurmgen.api.submitting import planned as api_planned

    return api_planned(SpecSource(spec, tuple(overrides)), templates, base, err)


def submit_spec(spec: Path, overrides: list[str], templates: Path | None, single: bool = False) -> Submission | None:
    """Submit a spec through the API's path (slurmgen.submit's): warnings and a summary on stderr, the job id
    alone on stdout (a sweep: its id, and None)."""
    from slurmgen.api.submitting import submit_plan
    from slurmgen.jobs.journal import home

    base = home()
    p = planned(spec, overrides, templates, base)
    if p.spec.sweep is not None:
        from slurmgen.cli import sweep_commands

        if single:
            raise UsageError("--wait follows one job; follow a sweep with `slurmgen status SWEEP`")
        sweep_commands.submit(p, base)
        return None
    done = submit_plan(p, base, err)
    cluster = f" on cluster {done.cluster}" if done.cluster else ""
    err(f"submitted job {done.job_id}{cluster}; run dir {p.run_dir}; logs in {p.log_dir}")
    print(done.job_id, flush=True)
    return done


def _target(text: str) -> Target:
    from slurmgen.jobs.journal import Journal, find_home
    from slurmgen.jobs.targets import resolve
    from slurmgen.local.local_jobs import records

    base = find_home()
    journal = Journal(base)
    ran = records(base)
    target = resolve(text, journal.jobs(), journal.path, local=[r.entry for r in ran])
    if target.entry is None and any(r.job_id == text.strip() for r in ran):
        err(f"note: {text.strip()} is Slurm's job {text.strip()}; the job run here is local-{text.strip()}")
    return target


def _job(target: Target) -> Job:
    """The API's handle on a (Slurm) job that a JOB argument named."""
    from slurmgen.api.job import Job

    return Job.for_target(target)


@commands.command("submit")
def submit_command(
    spec: SpecArg,
    set_: SetOpt = None,
    templates: TemplatesOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the script and the sbatch command only.")] = False,
    test_only: Annotated[
        bool, typer.Option("--test-only", help="Ask the scheduler whether and when the job could run; submit nothing.")
    ] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Follow the job to its end; exit with its exit code.")] = False,
) -> None:
    """Validate, render and submit a job; print its id alone on stdout."""
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
    from slurmgen.jobs.journal import home
    from slurmgen.jobs.plan import dry_run_lines

    p = planned(spec, overrides, templates, home())
    if dry_run and p.spec.sweep is not None:
        from slurmgen.cli import sweep_commands

        sweep_commands.dry_run(p)
        return
    if dry_run:
        from slurmgen.script.directives import sq
        from slurmgen.spec.secrets import mask

        sys.stdout.write(mask(p.script, p.spec.env, sq))  # what a terminal or a CI log shows: no token
        for line in dry_run_lines(p):
            err(line)
        return
    from slurmgen.jobs.submit import would_run
    from slurmgen.slurm.client import SlurmClient

    result = would_run(p, SlurmClient())
    start = result.start.isoformat(sep=" ") if result.start else "an unknown time"
    print(
        f"job {p.spec.name} can run: it would start at {start} on {result.nodes} "
        f"(partition {result.partition}, {result.processors} processors)"
    )


def _submit_and_wait(spec: Path, overrides: list[str], templates: Path | None) -> None:
    """Submit, follow the job to its end and exit with its code; slurmgen's own failures exit 125 (wait.py)."""
    from slurmgen.cli.output import report
    from slurmgen.errors import SlurmgenError
    from slurmgen.jobs.wait import EXIT_WAIT_ERROR, result_line
    from slurmgen.slurm.client import SlurmClient

    job = ""
    try:
        done = submit_spec(spec, overrides, templates, single=True)
        assert done is not None  # single=True refuses a sweep
        job = str(done.job_id)
        _wait(SlurmClient(), job)
    except SlurmgenError as exc:
        report(exc)
        err(f"slurmgen: exiting {EXIT_WAIT_ERROR}: slurmgen or Slurm failed, not the job (see the line above)")
        print(result_line(job, "ERROR", EXIT_WAIT_ERROR), flush=True)
        raise typer.Exit(EXIT_WAIT_ERROR) from None


def _wait(client: SlurmClient, job: str) -> None:
    from slurmgen.jobs.history import last_failing
    from slurmgen.jobs.wait import follow, result_line

    progress = Progress()
    target = _target(job)
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
        from slurmgen.jobs.wait import describe
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


@commands.command("requeue")
def requeue_command(
    job: JobArg,
    hold: Annotated[bool, typer.Option("--hold", help="Requeue and hold (scontrol requeuehold).")] = False,
    finished: Annotated[bool, typer.Option("--finished", help="Also requeue a job that already ended.")] = False,
) -> None:
    """Requeue a running job: it restarts from the top of its script with the same id."""
    target = _target(job)
    if target.local:
        raise UsageError(
            f"{target.label} ran on this machine: its runner requeues it when it asks; to run it again from its "
            f"saved state: slurmgen resume {target.label}"
        )
    step = _job(target).requeue_step(hold=hold, finished=finished)
    err(step.message)
    err(f"done; follow it with: slurmgen status {step.target}")


@commands.command("resume")
def resume_command(job: JobArg) -> None:
    """Bring back a job that ended before its work was done (cancelled, preempted, timed out), from its last
    saved state: requeued while Slurm knows it, else its script submitted again."""
    target = _target(job)
    if target.local:
        from slurmgen.cli.local_commands import resume_local_job

        resume_local_job(target)
    step, new = _job(target).resume_step()
    err(step.message)
    if new is None:
        err(f"done; follow it with: slurmgen status {step.requeue_target}")
        return
    err(f"submitted job {new.id}; follow it with: slurmgen status {new.id}")
    print(new.id, flush=True)


@commands.command("status")
def status_command(
    job: Annotated[str | None, typer.Argument(metavar="JOB", help="A job id or spec; default: recent jobs.")] = None,
) -> None:
    """A table of job states: one job (or array), or the recent jobs of the journal."""
    from slurmgen.cli import sweep_commands
    from slurmgen.cli.local_commands import local_rows
    from slurmgen.jobs import status as st
    from slurmgen.jobs.control import unknown_job
    from slurmgen.jobs.journal import Journal, find_home
    from slurmgen.slurm.client import SlurmClient

    if job is not None and sweep_commands.status(job):
        return
    client = SlurmClient()
    extra: list[st.Row] = []
    if job is not None:
        targets = [_target(job)]
        if targets[0].local:
            print(st.table(local_rows(find_home(), targets[0].label)))
            from slurmgen.jobs.history import restart_lines

            for line in restart_lines(
                targets
            ):  # restarts and excluded nodes (`slurmgen run --kill-rank`, `--bad-node`)
                err(line)
            return
    else:
        base = find_home()
        journal = Journal(base)
        targets, extra, notes = st.recent(journal, client)
        for note in notes:
            err(note)
        ran = local_rows(base)
        if not targets and not extra and not ran:
            err(f"no jobs in the journal {journal.path}; submit one with `slurmgen submit SPEC` or run one with "
                "`slurmgen run SPEC`")  # fmt: skip
            return
        if not targets:  # only local jobs and unresolved submissions: nothing to ask Slurm
            print(st.table([*extra, *ran]))
            return
        extra += ran
    from slurmgen.jobs.history import last_failing

    rows, unknown = st.rows_for(targets, client, failing=last_failing)
    if unknown and not rows:
        raise unknown_job(unknown[0].job)
    print(st.table([*rows, *extra]))
    from slurmgen.jobs.history import window_warnings

    for line in window_warnings(targets):  # a save that would be killed at the next stop
        err(line)
    from slurmgen.jobs.history import restart_lines

    for line in restart_lines(targets):  # restarts inside the allocation (README, "When things fail")
        err(line)


@commands.command("logs")
def logs_command(
    job: JobArg,
    follow_: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
    node: Annotated[str | None, typer.Option("--node", metavar="NODE", help="Only this node's log.")] = None,
    rank: Annotated[
        int | None, typer.Option("--rank", metavar="N", min=0, help="Only what rank N's program printed.")
    ] = None,
    point: PointOpt = None,
) -> None:
    """Print the batch log, the per-node logs and the ranks' logs of a job (all requeued runs: they are appended)."""
    from slurmgen.cli.sweep_commands import point_job

    target = _target(point_job(job, point, "logs"))
    if not follow_ and not target.local:
        _job(target).write_logs(_write_bytes, rank, node)
        return
    from slurmgen.jobs import logs as lg
    from slurmgen.slurm.client import SlurmClient

    client = SlurmClient()
    if node is not None:
        lg.check_node_name(node)
    if node is not None and rank is not None:
        raise UsageError("--node and --rank exclude each other: a rank's log holds only that rank's output")
    infos = [] if target.local else client.show_jobs(target.job)  # a local job: its journal knows its logs
    follower = lg.Follower(out=_write_bytes, cwd=Path.cwd())

    def files() -> list[Path]:
        return lg.select(lg.batch_logs(target, infos), node, rank)

    if not follow_:  # a local job: its journal knows its logs
        found = files()
        if not found:
            raise UsageError(lg.missing_message(target, lg.batch_logs(target, infos), node, infos, rank))
        follower.poll(found)
        return

    def finished() -> bool:
        if target.local:
            from slurmgen.local.local_jobs import live_runner

            assert target.entry is not None
            return live_runner(Path(target.entry.run_dir)) is None
        current = client.show_jobs(target.job)
        return not current or all(i.state.is_terminal for i in current)

    if not files():
        err(lg.missing_message(target, lg.batch_logs(target, infos), node, infos, rank) + " Waiting for them...")
    lg.follow(files, finished, follower, state_poll=lg.POLL if target.local else lg.STATE_POLL)


def _write_bytes(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@commands.command("cancel")
def cancel_command(
    job: JobArg,
    signal: Annotated[
        str | None, typer.Option("--signal", metavar="SIG", help="Send SIG instead of cancelling (e.g. USR2).")
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to", metavar="WHO", help="batch, steps or all (default: batch for slurmgen jobs' own signals)."
        ),
    ] = None,
    point: PointOpt = None,
) -> None:
    """Cancel a job, or send it a signal (USR2: a clean exit, without scancel's kill timer). A sweep: every array
    of it, or one point with --point."""
    from slurmgen.cli import sweep_commands

    if to is not None and to not in ("batch", "steps", "all"):
        raise UsageError(f"--to {to}: choose batch, steps or all")
    if to is not None and signal is None:
        raise UsageError("--to needs --signal")
    job = sweep_commands.point_job(job, point, "cancel")
    if point is None and sweep_commands.cancel_sweep(job, signal):
        return
    target = _target(job)
    if target.local:
        from slurmgen.cli.local_commands import cancel_local_job
        from slurmgen.signal_names import require_signal_name

        sig = None if signal is None else require_signal_name(signal, "--signal")
        cancel_local_job(target, sig, to)
        return
    handle = _job(target)
    step = handle.cancel_step(signal, to)
    if step is None:
        err(f"job {handle.id} already ended; nothing to cancel")
        return
    err(step.message)
