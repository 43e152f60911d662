"""Command-line options and arguments shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", metavar="PATH=VALUE", help="Override a field, e.g. --set nodes=4 (repeatable)."),
]
TemplatesOpt = Annotated[
    Path | None, typer.Option("--templates", metavar="DIR", help="Look for templates in DIR first.")
]
# `slurmgen submit SPEC -- --lr 3e-4`: the words after `--` go after the spec's command (click reads everything after
# `--` as arguments, options included).
ArgsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="[-- ARGS...]",
        help="Arguments for the program, after the spec's command (`${NAME}` expands as in the spec).",
        show_default=False,
    ),
]
SpecArg = Annotated[Path, typer.Argument(metavar="SPEC", help="The job spec (YAML).", show_default=False)]
JobArg = Annotated[
    str,
    typer.Argument(
        metavar="JOB",
        help="A job id (123, 123_4, 123+1), a local job (local-2, local-2_0), a sweep id, or a spec/job/sweep name: "
        "its last job or sweep.",
    ),
]
PointOpt = Annotated[
    int | None, typer.Option("--point", metavar="I", min=0, help="A sweep's point I (its latest run).")
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        metavar="NAME",
        help="Use the cluster profile NAME (clusters.yaml): its defaults go under the spec.",
    ),
]
