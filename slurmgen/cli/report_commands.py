"""`slurmgen report JOB`: what a job's time went to (goodput, the badput buckets, the checkpoint advice), for a
job, a sweep or a local job, while it runs or after. `--json` prints the data (schema in docs/goodput.md),
`--html FILE` writes the timeline picture. Thin: find the run histories (slurmgen.jobs.goodput_files), print what
slurmgen.goodput computes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from slurmgen.cli.options import JobArg
from slurmgen.cli.output import err

commands = typer.Typer()


@commands.command("report")
def report_command(
    job: JobArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (docs: goodput).")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", metavar="FILE", help="Write the timeline picture: one offline HTML file.")
    ] = None,
) -> None:
    """Goodput and where the rest of the time went (queue, start-up, saves, restores, redone steps, recovery,
    hangs), with checkpoint-interval advice. Works while the job runs and after it has left the queue."""
    from slurmgen.cli.job_commands import _target
    from slurmgen.cli.sweep_commands import record_for
    from slurmgen.goodput import html as page
    from slurmgen.goodput import text
    from slurmgen.jobs.goodput_files import job_report, reports_json, sweep_report
    from slurmgen.slurm.client import SlurmClient

    record = None if "_" in job else record_for(job)
    if record is not None:
        sweep = sweep_report(record)
        if html is not None:
            html.write_text(page.sweep_page(sweep), encoding="utf-8")
            err(f"wrote {html}")
        if as_json:
            print(json.dumps(sweep.to_json(), indent=2))
        elif html is None:
            print("\n".join(text.sweep_lines(sweep)))
        return
    target = _target(job)
    reports = job_report(target, None if target.local else SlurmClient())
    if html is not None:
        html.write_text(page.job_page(reports), encoding="utf-8")
        err(f"wrote {html}")
    if as_json:
        print(json.dumps(reports_json(reports), indent=2))
    elif html is None:
        print("\n\n".join("\n".join(text.report_lines(r)) for r in reports))
