"""The repository's .gitignore: what slurmgen leaves behind wherever it runs from (`cd jobs && slurmgen run
cpu-debug.yaml` writes jobs/logs/ and jobs/.slurmgen/) stays out of `git status`, and nothing tracked is ignored."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GIT = shutil.which("git")


def git(cwd: Path, *args: str) -> str:
    assert GIT is not None
    done = subprocess.run([GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_what_a_run_from_a_subdirectory_leaves_is_ignored(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    shutil.copy(REPO / ".gitignore", tmp_path / ".gitignore")
    for leftover in (
        "jobs/logs/cpu-debug-2.log",
        "jobs/logs/cpu-debug-2/rank-0.log",
        "jobs/logs/state/2.state",
        "jobs/.slurmgen/local/last-id",
        "jobs/.slurmgen/journal.jsonl",
        "logs/cpu-debug-1.log",
        ".slurmgen/journal.jsonl",
    ):
        path = tmp_path / leftover
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    (tmp_path / "jobs" / "train.yaml").write_text("name: t\n")  # a spec next to them is still seen
    untracked = git(tmp_path, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert sorted(untracked) == ["?? .gitignore", "?? jobs/train.yaml"]


@pytest.mark.skipif(GIT is None or not (REPO / ".git").exists(), reason="needs git and a git checkout")
def test_no_tracked_file_is_ignored() -> None:
    assert git(REPO, "ls-files", "--cached", "--ignored", "--exclude-standard") == ""
