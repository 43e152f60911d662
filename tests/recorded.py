"""Where the tests' data lives, and the one way to read a recorded Slurm answer."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# Slurm output, one file per form (README.md there): handwritten-* forms at the top, and one directory of
# recordings per Slurm version (tests/cluster/record-output.sh).
SLURM_DATA = TESTS / "data" / "slurm"
PRIMARY = "22.05"  # the version whose recordings the tests read unless they name one
DATA = SLURM_DATA / PRIMARY
VERSIONS = sorted(p.name for p in SLURM_DATA.iterdir() if p.is_dir() and (p / "MANIFEST.txt").is_file())
# A test that reads recordings runs once per version: `@every_version` and a `version: str` parameter.
every_version = pytest.mark.parametrize("version", VERSIONS, ids=[f"slurm-{v}" for v in VERSIONS])


def data_path(name: str, version: str = PRIMARY) -> Path:
    """Where one file lives: a handwritten-* form, or a recording of ``version``."""
    return SLURM_DATA / name if name.startswith("handwritten-") else SLURM_DATA / version / name


@cache
def _exit_statuses(version: str) -> dict[str, int]:
    """MANIFEST.txt: `name<TAB>rc=N<TAB>command`, the exit status each recorded command had."""
    manifest = SLURM_DATA / version / "MANIFEST.txt"
    rows = (line.split("\t") for line in manifest.read_text().splitlines() if line.strip())
    return {row[0]: int(row[1].removeprefix("rc=")) for row in rows}


def recorded_text(name: str, version: str = PRIMARY) -> str:
    """One recorded file, by its full name (``show-job-o-running.out``)."""
    return data_path(name, version).read_text()


def recorded(name: str, version: str = PRIMARY) -> subprocess.CompletedProcess[str]:
    """What one recorded command returned: stdout (NAME.out), stderr (NAME.err) and the exit status from
    MANIFEST.txt (0 for hand-written files, which are not in it)."""
    out, err = data_path(f"{name}.out", version), data_path(f"{name}.err", version)
    return subprocess.CompletedProcess(
        [name],
        _exit_statuses(version).get(name, 0),
        out.read_text() if out.exists() else "",
        err.read_text() if err.exists() else "",
    )
