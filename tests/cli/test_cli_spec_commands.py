"""render, validate, schema and the CLI's frame (--version, help, errors) in-process: stdout, stderr, exit codes,
and that nothing is written when it must not be."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from recorded import REPO

from slurmgen.script.render import render
from slurmgen.spec.load import load_file

from .cli_setup import run

BAD = REPO / "tests" / "spec" / "bad_specs"
GOOD = REPO / "jobs" / "cpu-debug.yaml"


def test_render_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "render", str(GOOD), "--set", "nodes=3")
    assert code == 0 and err == ""
    assert out == render(load_file(GOOD, ["nodes=3"]).spec)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_render_writes_a_file_atomically_with_the_umasks_mode(
    umask: int, mode: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "job.sbatch"
    previous = os.umask(umask)
    try:
        code, out, err = run(capsys, "render", str(GOOD), "-o", str(target))
    finally:
        os.umask(previous)
    assert code == 0 and out == "" and err == f"wrote {target}\n"
    assert target.read_text() == render(load_file(GOOD).spec)
    assert target.stat().st_mode & 0o777 == mode  # what `slurmgen render ... > job.sbatch` would give
    assert [p.name for p in tmp_path.iterdir()] == ["job.sbatch"]  # no temporary file left


def test_render_over_an_existing_file_keeps_its_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "job.sbatch"
    target.write_text("old\n")
    target.chmod(0o640)
    code, _, _ = run(capsys, "render", str(GOOD), "-o", str(target))
    assert code == 0 and target.read_text() == render(load_file(GOOD).spec)
    assert target.stat().st_mode & 0o777 == 0o640


def test_a_broken_user_template_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    cases = {
        "#!/bin/bash\n{% if %}\n": ":2: template syntax: ",
        "#!/bin/bash\necho\n{{ no_such_value }}\n": ":3: 'no_such_value' is undefined",
        '#!/bin/bash\necho\n{{ 1 + "a" }}\n': ":3: TypeError: ",
        '#!/bin/bash\n{% include "missing.j2" %}\n': ":2: template missing.j2 not found",
    }
    for text, expected in cases.items():
        (templates / "sbatch.sh.j2").write_text(text)
        code, out, err = run(capsys, "render", str(GOOD), "--templates", str(templates))
        assert (code, out) == (2, ""), text
        assert err.startswith(f"error: {templates / 'sbatch.sh.j2'}{expected}"), err
        assert len(err.splitlines()) == 1, err


@pytest.mark.parametrize("where", ["missing-dir/x.sh", "."])
def test_render_to_a_place_it_cannot_write_is_one_line(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / where
    code, out, err = run(capsys, "render", str(GOOD), "-o", str(target))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: -o {target}: ")
    assert "Traceback" not in err


def test_render_of_a_bad_spec_writes_nothing_and_keeps_the_old_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "job.sbatch"
    target.write_text("precious\n")
    code, out, err = run(capsys, "render", str(BAD / "env-no.yaml"), "-o", str(target))
    assert code == 2 and out == "" and err.startswith("error: ")
    assert target.read_text() == "precious\n"


def test_validate_reports_each_file_in_the_order_given(capsys: pytest.CaptureFixture[str]) -> None:
    bad = BAD / "env-no.yaml"
    code, out, err = run(capsys, "validate", str(GOOD), str(bad), str(GOOD))
    lines = err.splitlines()
    assert code == 2 and out == ""
    assert lines[0] == f"ok: {GOOD}" and lines[-1] == f"ok: {GOOD}"
    assert all(line.startswith(f"error: {bad}") for line in lines[1:-1]) and len(lines) > 2


def test_validate_strict_turns_warnings_into_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "warned.yaml"
    spec.write_text(GOOD.read_text() + 'env: {SLURM_X: "1"}\n')  # a warning, not an error
    code, _, err = run(capsys, "validate", str(spec))
    assert code == 0 and err.startswith("warning: ") and err.endswith(f"ok: {spec}\n")
    code, _, err = run(capsys, "validate", "--strict", str(spec))
    assert code == 2 and "ok:" not in err
    assert err.startswith("error: ") and err.rstrip().endswith("(--strict)")


def test_schema_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema")
    assert code == 0 and json.loads(out)["required"] == ["name", "command"]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from slurmgen import __version__

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"slurmgen {__version__}\n"


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        # Plain metavars, as man pages write them: REQUIRED, [OPTIONAL], ... for repeatable (Typer's own {SPEC} reads
        # like a set of choices)
        ("render", "Usage: slurmgen render [OPTIONS] SPEC [-- ARGS...]\n"),
        ("validate", "Usage: slurmgen validate [OPTIONS] SPEC...\n"),
        ("status", "Usage: slurmgen status [OPTIONS] [JOB]\n"),
        ("logs", "Usage: slurmgen logs [OPTIONS] JOB\n"),
        ("history", "Usage: slurmgen history [OPTIONS] JOB\n"),
        ("run", "Usage: slurmgen run [OPTIONS] [SPEC] [-- ARGS...]\n"),
    ],
)
def test_help_names_the_arguments_plainly(command: str, usage: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0 and out.startswith(usage)
