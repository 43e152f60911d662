"""Where the tests' data lives, and the one way to read a recorded Slurm answer."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data" / "slurm"  # recorded Slurm output, one file per form (README.md there)


@cache
def _exit_statuses() -> dict[str, int]:
    """MANIFEST.txt: `name<TAB>rc=N<TAB>command`, the exit status each recorded command had."""
    rows = (line.split("\t") for line in (DATA / "MANIFEST.txt").read_text().splitlines() if line.strip())
    return {row[0]: int(row[1].removeprefix("rc=")) for row in rows}


def recorded_text(name: str) -> str:
    """One recorded file, by its full name (``show-job-o-running.out``)."""
    return (DATA / name).read_text()


def recorded(name: str) -> subprocess.CompletedProcess[str]:
    """What one recorded command returned: stdout (NAME.out), stderr (NAME.err) and the exit status from
    MANIFEST.txt (0 for hand-written files, which are not in it)."""
    out, err = DATA / f"{name}.out", DATA / f"{name}.err"
    return subprocess.CompletedProcess(
        [name],
        _exit_statuses().get(name, 0),
        out.read_text() if out.exists() else "",
        err.read_text() if err.exists() else "",
    )
