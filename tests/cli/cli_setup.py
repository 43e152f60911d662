"""What the in-process CLI tests share: running `slurmgen` as `main(argv)` and capturing what it prints, and a
working directory whose PATH holds only the stand-in Slurm commands (never the real Slurm of this machine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_slurm import FakeSlurm
from tiny_job import SPEC

from slurmgen.cli.app import main

# The small job with its lead time written (the quarter of its 5-minute limit that it would get anyway): these
# tests compare stderr, and are not about the note a lead time cut to fit the limit brings.
TINY = SPEC.format(output="logs") + "preemption: {lead_time: 75}\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`slurmgen ARGV...` in this process: (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def install_fake(fake: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """Put FAKE's commands alone on PATH, a fresh home and cache, and cd into a work directory holding tiny.yaml."""
    fake.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(fake.bin_dir))
    monkeypatch.delenv("SLURMGEN_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "tiny.yaml").write_text(TINY)
    return fake
