"""The job's Python before the queue: the pure verdict on a version, and the probe through a runner, on real
interpreters where this machine has them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence

import pytest
from runtime.test_runtime_import import find_python

from slurmgen import python_check
from slurmgen.slurm.client import run_command


def test_the_version_is_read_from_the_probe_line() -> None:
    assert python_check.parse_version("(3, 9)\n") == (3, 9)
    assert python_check.parse_version("Python 3.9.18") is None
    assert python_check.parse_version("") is None


def test_the_floors_decide() -> None:
    old = python_check.judge("/opt/py38", (3, 8))
    assert not old.ok and old.problem == (
        "python: /opt/py38 is Python 3.8; slurmgen's batch shell helper and task supervisor need 3.9 or newer: "
        "set the spec field python to a newer interpreter"
    )
    nine = python_check.judge("python3", (3, 9))
    assert nine.ok and nine.note is not None and "cannot import slurmgen.runtime (needs 3.10 or newer)" in nine.note
    assert python_check.judge("python3", (3, 10)) == python_check.PythonCheck("python3", (3, 10))
    missing = python_check.judge("python9", None, "bash: python9: command not found\n")
    assert missing.problem == (
        "python: python9 did not run (bash: python9: command not found): set the spec field python"
    )


def test_the_probe_is_one_call_through_the_runner() -> None:
    calls: list[list[str]] = []

    def runner(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, "(3, 8)\n", "")

    assert python_check.probe("/opt/py38", runner).version == (3, 8)
    assert calls == [["/opt/py38", "-c", python_check.PROBE]]


def test_the_probe_says_when_the_interpreter_is_missing_or_hangs() -> None:
    missing = python_check.probe("/nonexistent/python3", run_command)
    assert missing.problem == "python: /nonexistent/python3 did not run (not found): set the spec field python"

    def hung(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(list(argv), timeout)

    assert "no answer within 5 s" in str(python_check.probe("python3", hung, timeout=5).problem)


@pytest.mark.parametrize(("version", "ok"), [("3.8", False), ("3.9", True), ("3.10", True)])
def test_real_interpreters(version: str, ok: bool) -> None:
    found = find_python(version)
    if found is None:
        pytest.skip(f"no working python{version} here")
    checked = python_check.probe(found, run_command)
    assert (checked.version, checked.ok) == (tuple(int(p) for p in version.split(".")), ok)
    assert python_check.probe(sys.executable, run_command) == python_check.PythonCheck(
        sys.executable, sys.version_info[:2]
    )
