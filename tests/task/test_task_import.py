"""slurmgen.task's import-cost rule (its __init__ says why): no torch or other heavy package until the program
needs it, and the entry point the script names, with its old name for scripts rendered before the split."""

from __future__ import annotations

import subprocess
import sys

from import_graph import loaded_by, modules, within
from recorded import REPO

HEAVY = ("torch", "typer", "click", "jinja2", "yaml", "pydantic", "jsonschema", "numpy")
TASK_MODULES = sorted(n for n in modules() if within(n, "slurmgen.task") and not n.endswith("__main__"))


def test_importing_every_task_module_loads_nothing_heavy() -> None:
    new = loaded_by("import " + ", ".join(n for n in TASK_MODULES if not n.endswith("sitecustomize")))
    assert "slurmgen.task.supervisor" in new and "slurmgen.task.torchrun_agent" in new
    assert [m for m in new if m.split(".")[0] in HEAVY] == []


def test_the_entry_point_and_its_old_names_run_the_same_launcher() -> None:
    """`python3 -m slurmgen.task` is what the script runs; scripts rendered before the package split run
    `python3 -m slurmgen.runtime.launch`, or in a container import its main: one usage line, exit 2, for each."""
    commands = [
        [sys.executable, "-m", "slurmgen.task"],
        [sys.executable, "-m", "slurmgen.runtime.launch"],
        [sys.executable, "-c", "import sys; from slurmgen.runtime.launch import main; sys.exit(main())"],
    ]
    runs = [subprocess.run(c, cwd=REPO, capture_output=True, text=True, timeout=60) for c in commands]
    assert [r.returncode for r in runs] == [2, 2, 2]
    assert runs[0].stderr == runs[1].stderr == runs[2].stderr
    assert (
        "usage: python3 -m slurmgen.task [--torchrun-agent] [--expand=I,J] [--expand-env=NAME=VALUE]... -- CMD"
        in runs[0].stderr
    )
