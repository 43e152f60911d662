"""The bad-input corpus: every spec in tests/bad_specs must fail with exit code 2 and the exact messages in its
`# expect:` lines, one line per problem, never a traceback, and never touch a file that already exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from slurmgen.cli.app import main

CORPUS = sorted((Path(__file__).parent / "bad_specs").glob("*.yaml"))
LINE = re.compile(r"^error: (?P<source>[^:]+(?::\d+)?|--set): (?P<rest>.+)$")


def expectations(path: Path) -> tuple[list[str], list[str]]:
    expects, sets = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# expect: "):
            expects.append(line.removeprefix("# expect: "))
        elif line.startswith("# set: "):
            sets += ["--set", line.removeprefix("# set: ")]
    return expects, sets


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_bad_spec_fails_with_its_message(path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    expects, sets = expectations(path)
    assert expects, f"{path.name} has no # expect: line"
    target = tmp_path / "job.sbatch"
    target.write_text("previous script\n")
    code = main(["render", str(path), "-o", str(target), *sets])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors, err
    for line in errors:
        match = LINE.match(line)
        assert match, f"not one clear line naming the source: {line!r}"
        assert match["source"] in (str(path), "--set") or match["source"].startswith(f"{path}:")
    for expected in expects:
        assert any(expected in line for line in errors), f"missing {expected!r} in:\n{err}"
    assert target.read_text() == "previous script\n"  # nothing on disk was lost or half-written
    assert [p.name for p in tmp_path.iterdir()] == ["job.sbatch"]  # and no temporary file was left behind


def test_validate_reports_every_file(capsys: pytest.CaptureFixture[str]) -> None:
    picked = [p for p in CORPUS if p.stem in ("unknown-key", "nodes-octal", "env-no")]
    good = Path(__file__).parent.parent.parent / "jobs" / "cpu-debug.yaml"
    code = main(["validate", *map(str, picked), str(good)])
    err = capsys.readouterr().err
    assert code == 2
    for path in picked:
        assert f"error: {path}:" in err
    assert f"ok: {good}" in err
    assert err.count("error: ") == 4  # env-no has two problems


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(b"name: caf\xe9\ncommand: [python]\ntime: '10'\n")
    assert main(["render", str(spec)]) == 2
    assert f"error: {spec}: is not UTF-8 text (byte 9); save it as UTF-8" in capsys.readouterr().err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "/nonexistent/job.yaml"]) == 2
    assert "error: /nonexistent/job.yaml: cannot read: No such file or directory" in capsys.readouterr().err


def test_spec_linked_to_dev_zero_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.yaml"
    spec.symlink_to("/dev/zero")  # read to its end, it never ends
    assert main(["render", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {spec}: is not a regular file (a device, FIFO or socket); give the path of the spec's YAML file\n"
    )


def test_spec_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.yaml"
    os.mkfifo(spec)
    assert main(["render", str(spec)]) == 2
    assert "is not a regular file (a device, FIFO or socket)" in capsys.readouterr().err


def test_spec_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: is a directory; give the path of the spec's YAML file\n"


def test_spec_over_one_mib_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncommand: [python]\ntime: '10'\n" + "# padding\n" * 110_000)
    assert main(["render", str(spec)]) == 2
    assert capsys.readouterr().err == f"error: {spec}: is larger than 1 MiB; a job spec is a short YAML file\n"


def test_deep_nesting_in_an_override_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    good = Path(__file__).parent.parent.parent / "jobs" / "cpu-debug.yaml"
    assert main(["render", str(good), "--set", "command=" + "[" * 5000 + "]" * 5000]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: --set: command: lists and mappings nest deeper than 32 levels; a job spec is flat"
    ]
