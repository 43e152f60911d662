"""slurmgen.batch's import-cost rule (its __init__ says why): the standard library and slurmgen's own modules,
never torch or another third-party package, whichever command runs, and the entry point the script names."""

from __future__ import annotations

import subprocess
import sys

from import_graph import closure, graph, loaded_by, modules, third_party, within
from recorded import REPO

BATCH_MODULES = sorted(n for n in modules() if within(n, "slurmgen.batch") and not n.endswith("__main__"))


def test_importing_every_batch_module_loads_only_the_standard_library() -> None:
    new = loaded_by("import " + ", ".join(BATCH_MODULES))
    assert "slurmgen.batch.commands" in new
    assert third_party(new) == []


def test_no_command_reaches_a_third_party_import() -> None:
    """Function-level imports too (`end` imports the decision and the checkpoint file names only when it runs)."""
    arrows = graph("run")
    reached = closure(BATCH_MODULES, arrows)
    assert "slurmgen.runtime.checkpoint.layout" in reached  # the reader follows function-level imports
    imported = {target for name in reached for target in arrows.get(name, ())}
    assert third_party(imported) == []


def test_the_entry_point_and_its_old_name_run_the_same_helper() -> None:
    """`python3 -m slurmgen.batch` is what the script runs; scripts rendered before the package split run
    `python3 -m slurmgen.runtime.batch` (jobs queued across an upgrade): the same usage line and exit code."""
    runs = [
        subprocess.run([sys.executable, "-m", entry], cwd=REPO, capture_output=True, text=True, timeout=60)
        for entry in ("slurmgen.batch", "slurmgen.runtime.batch")
    ]
    assert [r.returncode for r in runs] == [2, 2]
    assert runs[0].stderr == runs[1].stderr
    assert runs[0].stderr.startswith("usage: python3 -m slurmgen.batch begin")
