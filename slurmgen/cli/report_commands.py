"""`slurmgen report JOB`: what a job's time went to (goodput, the badput buckets, the checkpoint advice), for a
job, a sweep or a local job, while it runs or after. `--json` prints the data (schema in docs/goodput.md),
`--html FILE` writes the timeline picture. Thin: the job interface's handle
gives the report (slurmgen.queries.goodput_view); this prints it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from slurmgen.cli.options import JobArg
from slurmgen.cli.output import err

commands = typer.Typer()


@commands.command("report", short_help="Goodput: where a job's time went, and the save advice.")
def report_command(
    job: JobArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (docs: goodput).")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", metavar="FILE", help="Write the timeline picture: one offline HTML file.")
    ] = None,
) -> None:
    """Goodput and where the rest of the time went (queue, start-up, saves, restores, redone steps, recovery,
    hangs), with checkpoint-interval advice. Works while the job runs and after it has left the queue."""
    from slurmgen.backends.registry import handle_of
    from slurmgen.cli.output_file import refusal, write_output
    from slurmgen.errors import UsageError

    if html is not None and (why := refusal("--html", html, False, "report.html")) is not None:
        raise UsageError(why)  # before the job is looked up: a bad file name costs no report
    found = handle_of(job).goodput()  # a job, an array, a sweep, run here or on Slurm: one interface
    if html is not None:
        write_output(
            "--html", html, found.page(), "report.html"
        )  # as render -o: never through a link, never into a FIFO
        err(f"wrote {html}")
    if as_json:
        print(json.dumps(found.data, indent=2))
    elif html is None:
        print("\n".join(found.lines))
