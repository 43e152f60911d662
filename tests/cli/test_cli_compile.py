"""The one compile step seen from the commands: `render`, `validate`, `submit`, `run` and `doctor` say the same
warnings, and `submit` reads the spec file once and keeps the exact bytes it validated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_run import run_slurmgen
from fake_slurm import FakeSlurm
from recorded import REPO
from runtime.runtime_helpers import without_steering

from .cli_setup import install_fake, run

# Two warnings of the spec itself (time rounded up) and of the files where the job runs (the script is missing).
WARNS = """\
name: warns
command: [python3, missing.py]
time: "00:05:30"
nodes: 1
tasks_per_node: 1
preemption: false
"""


def warning_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning: ")]


def slurmgen(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**without_steering(), "PYTHONPATH": str(REPO)}
    env.pop("SLURMGEN_HOME", None)
    return run_slurmgen(*args, cwd=cwd, env=env, timeout=300)


def test_run_warns_exactly_as_render_does(tmp_path: Path) -> None:
    """The local run used to load the spec its own way and skip the warning about the missing script, then start
    the job and fail inside it."""
    (tmp_path / "warns.yaml").write_text(WARNS)
    rendered = slurmgen(tmp_path, "render", "warns.yaml")
    assert rendered.returncode == 0, rendered.stderr
    expected = warning_lines(rendered.stderr)
    assert len(expected) == 2
    assert "time: Slurm rounds seconds up" in expected[0] and "command: missing.py does not exist" in expected[1]
    ran = slurmgen(tmp_path, "run", "warns.yaml")
    # The job runs here, now: the missing script is one error before anything starts (no run, no restart).
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr == f"error: warns.yaml:2: {expected[1].split(': ', 2)[2]}\n"
    assert not (tmp_path / "logs").exists() and not (tmp_path / ".slurmgen").exists()
    (tmp_path / "missing.py").write_text("")
    rendered = slurmgen(tmp_path, "render", "warns.yaml")
    expected = warning_lines(rendered.stderr)
    assert len(expected) == 1
    ran = slurmgen(tmp_path, "run", "warns.yaml")
    assert ran.returncode == 0, ran.stderr
    assert warning_lines(ran.stderr) == expected
    assert ran.stderr.startswith("".join(f"{line}\n" for line in expected))  # said before the job starts


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm()
    for command in ("sbatch", "scontrol", "squeue", "scancel"):
        fake.on(command)
    return install_fake(fake, tmp_path, monkeypatch)


def test_validate_submit_and_doctor_warn_as_render_does(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    Path("warns.yaml").write_text(WARNS)
    code, _, rendered = run(capsys, "render", "warns.yaml")
    expected = warning_lines(rendered)
    assert code == 0 and len(expected) == 2
    code, _, validated = run(capsys, "validate", "warns.yaml")
    assert code == 0 and warning_lines(validated) == expected
    fake.on("sbatch", out="15\n")
    code, _, submitted = run(capsys, "submit", "warns.yaml")
    assert code == 0 and warning_lines(submitted) == expected
    fake.on("scontrol", out="")
    _, _, doctored = run(capsys, "doctor", "warns.yaml")
    assert warning_lines(doctored) == expected


_opened: list[str] = []
_watch: list[Path] = []


def _count_opens(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook (PEP 578; it cannot be removed, so it only counts while a test sets _watch)."""
    if event == "open" and _watch and isinstance(args[0], (str, bytes, os.PathLike)):
        path = Path(os.fsdecode(args[0]))
        if os.path.abspath(path) == str(_watch[0]):
            _opened.append(str(path))


sys.addaudithook(_count_opens)


def test_submit_opens_the_spec_once_and_keeps_those_bytes(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    """A CRLF file: the run directory keeps the bytes as they were read, not the text as parsed."""
    spec = Path("tiny.yaml").resolve()
    raw = spec.read_bytes().replace(b"\n", b"\r\n")
    spec.write_bytes(raw)
    fake.on("sbatch", out="15\n")
    _opened.clear()
    _watch.append(spec)
    try:
        code, out, err = run(capsys, "submit", "tiny.yaml")
    finally:
        _watch.clear()
    assert (code, out) == (0, "15\n"), err
    assert _opened == ["tiny.yaml"]
    (kept,) = Path(".slurmgen").glob("runs/tiny/*/spec.yaml")
    assert kept.read_bytes() == raw


def test_run_refuses_a_missing_script_unless_setup_lines_may_make_it(tmp_path: Path) -> None:
    """The local run's refusal (slurmgen.local.setup.load): an error naming file, line, field and fix; with setup:
    lines, which may fetch the file or change directory, it stays render's warning."""
    from slurmgen.errors import SpecError
    from slurmgen.local.setup import Options, load

    (tmp_path / "warns.yaml").write_text(WARNS)
    with pytest.raises(SpecError) as refused:
        load(tmp_path / "warns.yaml", Options(), [], tmp_path)
    assert str(refused.value).startswith(f"{tmp_path / 'warns.yaml'}:2: command: missing.py does not exist in ")
    (tmp_path / "fetches.yaml").write_text(WARNS + "setup: ['curl -O https://example.org/missing.py']\n")
    loaded = load(tmp_path / "fetches.yaml", Options(), [], tmp_path)
    assert any("missing.py does not exist" in str(w) for w in loaded.warnings)
