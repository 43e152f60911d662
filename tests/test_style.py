"""The test command checks style and types too: ruff (lint and format) and mypy --strict over slurmgen, tests and
bench, with the versions pinned in pyproject.toml's dev extra. A failure prints the tools' own report."""

from __future__ import annotations

import subprocess
import sys

import pytest
from recorded import REPO

CHECKS = {
    "ruff check": [sys.executable, "-m", "ruff", "check", "slurmgen", "tests", "bench"],
    "ruff format --check": [sys.executable, "-m", "ruff", "format", "--check", "slurmgen", "tests", "bench"],
    "mypy --strict": [sys.executable, "-m", "mypy"],  # files and strictness: [tool.mypy] in pyproject.toml
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHECKS))
def test_clean(name: str) -> None:
    done = subprocess.run(CHECKS[name], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{name} found problems:\n{done.stdout}{done.stderr}"
