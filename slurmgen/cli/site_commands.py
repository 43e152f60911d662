"""`slurmgen doctor` and `slurmgen history`: what this cluster does to a job on preemption, and what each run of a
job did. Thin: parse, call slurmgen.doctor.site / .history, print. Reports go to stdout, messages to stderr;
errors are raised and printed once by slurmgen.cli.app.main.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slurmgen.cli.job_commands import handle
from slurmgen.cli.options import ClusterOpt, JobArg, PointOpt, SetOpt
from slurmgen.cli.output import err, warn_all
from slurmgen.errors import SchedulerMissing, UsageError

commands = typer.Typer()


@commands.command("doctor", short_help="What preemption and the time limit do to a job here.")
def doctor_command(
    spec: Annotated[
        Path | None,
        typer.Argument(metavar="[SPEC|JOB]", help="A job spec: its partition, lead time and last save; or a job: "
                       "its checkpoint-interval advice. Default: every partition.", show_default=False),
    ] = None,
    set_: SetOpt = None,
    cluster: ClusterOpt = None,
) -> None:  # fmt: skip
    """What preemption and the time limit will do to a job here: whether a preempted job is requeued or
    cancelled, how long it has to save before it is killed, whether it is warned by its signal first, and what
    could go wrong, with the fix. Without a Slurm client, with a SPEC: what the spec alone shows."""
    from slurmgen.backends.registry import backend_for
    from slurmgen.doctor import site as doctor
    from slurmgen.journal import Journal, find_home
    from slurmgen.script.build import check_file, note_line

    facts, last = None, None
    if spec is not None and not spec.exists() and not set_:
        _doctor_job(str(spec))  # a job, not a spec: its checkpoint-interval advice (slurmgen/goodput/advice.py)
        return
    profile = None
    if cluster is not None:
        from slurmgen.spec.profile import find_profile

        profile = find_profile(cluster, None if spec is None else spec.parent)
    client = backend_for(profile).site_client()  # that cluster's Slurm (over ssh: through its shared connection)
    if spec is not None:
        checked = check_file(spec, set_ or [], Path.cwd(), profile)
        warn_all(checked.warnings)  # the same warnings and notes as render, validate, submit and run
        for note in checked.notes:
            err(note_line(note))
        facts = doctor.SpecFacts.of(str(spec), checked.spec)
        last = doctor.spec_last_save(Journal(find_home()), spec)
    elif set_:
        raise UsageError("--set needs a SPEC to apply to")
    try:
        report = doctor.render(doctor.examine(client, facts, last))
    except SchedulerMissing as exc:
        if facts is None:
            raise
        from slurmgen.doctor.offline import render_offline

        print(render_offline(facts, last, str(exc)), end="")
        return  # the image check needs the cluster too: render_offline lists it
    print(report, end="")
    failed = False
    if spec is not None:
        from slurmgen.python_check import probe

        found = probe(checked.spec.python, client.runner)  # where sbatch runs: here, or the cluster's login node
        said = found.problem or found.note or f"{found.python} is Python {found.version_text}"
        # one that did not run here may still run in the job (its setup lines, the nodes): said, not failed
        verdict = "ok" if found.ok else "FAILED" if found.version is not None else "unknown"
        print(f"\n  {'python':<13}{verdict}: {said}")
        failed = verdict == "FAILED"
    if spec is not None and checked.spec.container is not None:
        from slurmgen.doctor.image import check_image

        image = check_image(checked.spec)  # one short step on a node: the image and its python and torch
        if image is not None:
            print(f"\n  {'image':<13}{'ok' if image.ok else 'FAILED'}: {image.line}")
            failed = failed or not image.ok
    if failed:
        raise typer.Exit(1)


def _doctor_job(job: str) -> None:
    """`slurmgen doctor JOB`: the checkpoint-interval advice from the job's measured saves and interruptions."""
    from slurmgen.backends.registry import handle_of

    print("\n".join(handle_of(job).goodput().advice()))


@commands.command("history", short_help="One row per run of a job: when, where, how it ended.")
def history_command(job: JobArg, point: PointOpt = None) -> None:
    """One row per run of a job: start, end, nodes, exit code, cause, who requeued, the save. Works after the job
    has left the queue."""
    from slurmgen import run_history
    from slurmgen.queries import history

    chosen = handle(job, point)
    if (many := chosen.history_points()) is not None:  # a sweep, no --point: every point's runs and its values
        points = [(index, values, [e for d in dirs for e in run_history.History.load(str(d)).events])
                  for index, values, dirs in many]  # fmt: skip
        found = [p for p in points if p[2]]
        if not found:
            raise UsageError(f"{job}: no point of the sweep has a run history yet (none has started)")
        print(history.sweep_table(found))
        return
    log_dirs, why_none = chosen.history_dirs()
    shown = []
    for log_dir in log_dirs:
        events = run_history.History.load(str(log_dir)).events
        if events:
            shown.append((log_dir, history.table(history.rows(events))))
    if not shown:
        raise UsageError(why_none)
    for log_dir, text in shown:
        if len(log_dirs) > 1:
            print(f"==> {log_dir.name} <==")
        print(text)
    code = chosen.code()
    if code is not None:
        err(f"code: {code}")
    if args := chosen.args():
        import shlex

        from slurmgen.printable import printable

        err(f"args: {printable(shlex.join(args))}")  # as given after `--`; the same in every run of the job
