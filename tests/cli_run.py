"""`python -m slurmgen ARGS` as the tests start it: the one argv (for a Popen, or a cluster's run), and the one
blocking run that captures its output."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def slurmgen_argv(*args: str) -> list[str]:
    """The command line of `slurmgen ARGS` with the interpreter running the tests (its slurmgen, its venv)."""
    return [sys.executable, "-m", "slurmgen", *args]


def run_slurmgen(
    *args: str, cwd: Path | str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`slurmgen ARGS` to its end, stdout and stderr captured as text; a non-zero exit is the caller's to assert."""
    return subprocess.run(
        slurmgen_argv(*args),
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def local_job_id(done: subprocess.CompletedProcess[str]) -> str:
    """The id `slurmgen run` gave its job ("slurmgen: local-N: ..."): the next free one, not always 1, since an id
    whose rendezvous port another test holds is skipped (local/setup.py, id_taken)."""
    import re

    found = re.search(r"^slurmgen: local-(\d+):", done.stderr + done.stdout, re.M)
    assert found, f"no local job id in the output of slurmgen run:\n{done.stderr}"
    return found[1]
