"""Command-line options shared by several commands (render, validate, submit)."""

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
