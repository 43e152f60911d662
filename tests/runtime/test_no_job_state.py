"""Preemption outside a job (a script run directly, no SLURM_JOB_ID): no state is kept and none is resumed unless
the program names a path, so a second direct run never resumes from the first one unasked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runtime_helpers import base_env

# A training script as users write it: resume if there is a state, save every step, print where it started.
TRAIN = """
import sys
from slurmgen.runtime import Preemption
pre = Preemption(path=sys.argv[2] or None)
state = pre.load()
start = 0 if state is None else int(state["step"])
print(f"START {start}", flush=True)
for step in range(start, int(sys.argv[1])):
    pre.save({"step": step + 1})
print("DONE", flush=True)
"""


def train(cwd: Path, steps: int, path: str = "") -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-c", TRAIN, str(steps), path],
        cwd=cwd,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.torch
def test_a_direct_run_keeps_no_state_unless_given_a_path(tmp_path: Path) -> None:
    first = train(tmp_path, 3)
    assert "START 0" in first.stdout and "DONE" in first.stdout
    assert "no state is saved or resumed" in first.stderr
    assert first.stderr.count("no state is saved") == 1  # said once, not at every save
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no ./local.state, nothing else
    second = train(tmp_path, 5)  # other arguments, same directory: starts from scratch
    assert "START 0" in second.stdout
    named = str(tmp_path / "mine.state")
    assert "START 0" in train(tmp_path, 3, named).stdout
    assert "START 3" in train(tmp_path, 5, named).stdout  # a path the program names is resumed
