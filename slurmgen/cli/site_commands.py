"""`slurmgen doctor` and `slurmgen history`: what this cluster does to a job on preemption, and what each run of a
job did. Thin: parse, call slurmgen.jobs.doctor / .history, print. Reports go to stdout, messages to stderr;
errors are raised and printed once by slurmgen.cli.app.main.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slurmgen.cli.job_commands import _target as job_target
from slurmgen.cli.options import JobArg, PointOpt, SetOpt
from slurmgen.cli.output import warn_all
from slurmgen.errors import UsageError

commands = typer.Typer()


@commands.command("doctor")
def doctor_command(
    spec: Annotated[
        Path | None,
        typer.Argument(metavar="[SPEC|JOB]", help="A job spec: its partition, lead time and last save; or a job: "
                       "its checkpoint-interval advice. Default: every partition.", show_default=False),
    ] = None,
    set_: SetOpt = None,
) -> None:  # fmt: skip
    """What preemption and the time limit will do to a job here: mode, grace, user signal, windows, risks."""
    from slurmgen.jobs import doctor
    from slurmgen.jobs.journal import Journal, find_home
    from slurmgen.script.build import check_file
    from slurmgen.slurm.client import SlurmClient

    facts, last = None, None
    if spec is not None and not spec.exists() and not set_:
        _doctor_job(str(spec))  # a job, not a spec: its checkpoint-interval advice (slurmgen/goodput/advice.py)
        return
    if spec is not None:
        checked = check_file(spec, set_ or [], Path.cwd())
        warn_all(checked.warnings)  # the same warnings as render, validate, submit and run
        facts = doctor.SpecFacts.of(str(spec), checked.spec)
        last = doctor.spec_last_save(Journal(find_home()), spec)
    elif set_:
        raise UsageError("--set needs a SPEC to apply to")
    print(doctor.render(doctor.examine(SlurmClient(), facts, last)), end="")


def _doctor_job(job: str) -> None:
    """`slurmgen doctor JOB`: the checkpoint-interval advice from the job's measured saves and interruptions."""
    from slurmgen.jobs.goodput_files import job_report
    from slurmgen.slurm.client import SlurmClient

    target = job_target(job)
    for report in job_report(target, None if target.local else SlurmClient()):
        print(f"job {report.job}: checkpoint interval")
        if report.advice is None:
            print("  no save measured yet: the advice needs at least one save (Preemption.save)")
            continue
        print("\n".join(f"  {line}" for line in report.advice.lines()))


@commands.command("history")
def history_command(job: JobArg, point: PointOpt = None) -> None:
    """One row per run of a job: start, end, nodes, exit code, cause, who requeued, the save. Works after the job
    has left the queue."""
    from slurmgen import run_history
    from slurmgen.cli.sweep_commands import point_job
    from slurmgen.jobs import history
    from slurmgen.slurm.client import SlurmClient

    target = job_target(point_job(job, point, "history"))
    known = target.entry is not None and bool(target.entry.log_dir)
    infos = [] if known else SlurmClient().show_jobs(target.job)  # only to find the logs of a job not submitted here
    log_dirs = history.job_log_dirs(target, infos)
    shown = []
    for log_dir in log_dirs:
        events = run_history.History.load(str(log_dir)).events
        if events:
            shown.append((log_dir, history.table(history.rows(events))))
    if not shown:
        raise UsageError(history.no_history(target, log_dirs, bool(infos)))
    for log_dir, text in shown:
        if len(log_dirs) > 1:
            print(f"==> {log_dir.name} <==")
        print(text)
