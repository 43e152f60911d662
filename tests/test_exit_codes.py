"""Exit codes are defined once (slurmgen/exit_codes.py) and imported everywhere else: no module of slurmgen
assigns a number to a name that says it is an exit code, and no two of the codes that mean different things
share a number, except where the comment there says they mean the same (143: SIGTERM's code)."""

from __future__ import annotations

import re

from import_graph import PACKAGE

from slurmgen import exit_codes

DEFINITION = re.compile(r"^\s*(EXIT_[A-Z_]+|NODES_[A-Z]+)\s*(:\s*\w+\s*)?=\s*\d+", re.MULTILINE)


def test_only_exit_codes_defines_exit_codes() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {match.group(1)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "exit_codes.py"
        for match in DEFINITION.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_codes_of_one_meaning_do_not_collide() -> None:
    """The job's codes (what Slurm records for it) are distinct from each other, apart from SIGTERM's 143, which a
    task that saved on SIGTERM and a cancelled local run share on purpose (both are 128 + SIGTERM)."""
    job = {
        name: value
        for name, value in vars(exit_codes).items()
        if name.startswith("EXIT_") and name not in ("EXIT_CANCELLED", "EXIT_TERMINATED")
    }
    assert len(set(job.values())) == len(job), job
    assert exit_codes.EXIT_CANCELLED == exit_codes.EXIT_TERMINATED == 128 + 15
