"""The fast lane for `slurmgen render` (no Typer import) must behave exactly like the Typer command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slurmgen import cli, cli_fast

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "tests" / "bad_specs"


def both(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    fast_code = cli_fast.run(argv)
    fast = capsys.readouterr()
    slow_code = cli.main(argv)
    slow = capsys.readouterr()
    assert fast_code is not None, "the fast lane declined a plain render"
    return (fast_code, fast.out, fast.err), (slow_code, slow.out, slow.err)


@pytest.mark.parametrize(
    "args",
    [
        ["jobs/cpu-debug.yaml"],
        ["jobs/gpu-2node-torchrun.yaml", "--set", "nodes=4", "-s", "preemption.lead_time=600"],
        ["--set=nodes=3", "jobs/cpu-debug.yaml"],
        [str(BAD / "env-no.yaml")],
        [str(BAD / "lead-too-long.yaml"), "--set", "time=30"],
        ["/nonexistent.yaml"],
    ],
)
def test_same_output_and_exit_code(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    fast, slow = both(["render", *args], capsys)
    assert fast == slow


def test_same_file_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    a, b = tmp_path / "a.sh", tmp_path / "b.sh"
    assert cli_fast.run(["render", "jobs/cpu-debug.yaml", "-o", str(a)]) == 0
    assert cli.main(["render", "jobs/cpu-debug.yaml", "--output", str(b)]) == 0
    assert a.read_text() == b.read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "--help"],
        ["render"],
        ["render", "a.yaml", "b.yaml"],
        ["render", "a.yaml", "--bogus"],
        ["validate", "a.yaml"],
        [],
        ["render", "a.yaml", "-o"],
    ],
)
def test_other_shapes_go_to_typer(argv: list[str]) -> None:
    assert cli_fast.parse_render(argv) is None


def test_render_does_not_import_typer() -> None:
    code = (
        "import sys, runpy; sys.argv=['slurmgen','render','jobs/cpu-debug.yaml']; "
        "import slurmgen.__main__ as m; rc=m.main(); "
        "print('TYPER' if 'typer' in sys.modules else 'NO-TYPER', file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.stdout.startswith("#!/bin/bash")
    assert result.stderr.strip().endswith("NO-TYPER")
