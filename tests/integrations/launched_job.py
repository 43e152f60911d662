"""The job of the launcher tests (test_launchers_local.py, test_launchers_cluster.py): data/accelerate_launched.py
on 2 nodes x 2 workers under a per-node launcher, gloo on the CPU, and the line each process prints."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.runtime_helpers import free_low_port

from .integration_helpers import DATA, PY

PROGRAM = DATA / "accelerate_launched.py"
LINE = re.compile(
    r"rank (\d)/(\d) local (\d) node (\S+) role (\S+): sum (\d+), launched by accelerate: (yes|no), "
    r"final weights ([0-9a-f]{16})"
)


def rank_lines(logs: str) -> list[tuple[str, ...]]:
    """Each process's line, once: after `end_training()` destroyed its group, torch's gloo can still abort a
    finished worker at interpreter exit (SIGABRT, "terminate called without an active exception", about once in
    a CI run). slurmgen then restarts the step, as it must for a rank killed by a signal, and the restarted step
    prints the same lines again. A restart that mapped ranks or nodes differently adds lines and fails."""
    return sorted(set(LINE.findall(logs)))


def spec_text(out: Path, launcher: str, extra_args: list[str], *, args: list[str], preemption: str) -> str:
    return (
        "name: launched\n"
        f"command: {[PY, str(PROGRAM), *args]!r}\n"
        "time: '00:10:00'\n"
        f"launcher: {launcher}\nnodes: 2\nnproc_per_node: 2\n"
        f"python: {PY}\n"
        f"output: {out}/logs\n"
        f"distributed: {{backend: gloo, port: {free_low_port()}, port_range: 1, timeout: 120}}\n"
        f"preemption: {preemption}\n"
        f"torchrun: {{extra_args: {extra_args!r}}}\n"
        "env: {OMP_NUM_THREADS: '1'}\n"
    )
