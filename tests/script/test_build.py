"""The compile step on plain values: one read of the file, the bytes kept are the bytes validated, and the local
run's set-up gets the same warnings as `render`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from recorded import REPO

from slurmgen.local import setup
from slurmgen.script.build import build_file, check_file
from slurmgen.script.render import render
from slurmgen.submission import plan
from slurmgen.submission.run_dir import write_run_dir

SPEC = """\
name: built
command: [python3, train.py]
time: "00:05:30"
nodes: 1
tasks_per_node: 1
"""


def test_the_run_dir_keeps_the_bytes_validated_even_if_the_file_changes_after(tmp_path: Path) -> None:
    source = tmp_path / "built.yaml"
    source.write_text(SPEC)
    built = build_file(source, [], None, tmp_path)
    source.write_text(SPEC.replace("nodes: 1", "nodes: 64"))  # edited while the submission is under way
    base = tmp_path / ".slurmgen"
    p = plan.plan(source, built.spec, built.script, base, tmp_path, "TOKEN", (), built.text)
    write_run_dir(p, base)
    assert (p.run_dir / plan.SPEC_COPY).read_text() == SPEC
    assert built.script == render(built.spec) and built.spec.nodes == 1


def test_warnings_of_the_spec_then_of_the_files_then_of_the_script(tmp_path: Path) -> None:
    source = tmp_path / "built.yaml"
    source.write_text(SPEC)
    checked = check_file(source, [], tmp_path)
    assert [w.path for w in checked.warnings] == ["time", "command"]
    (tmp_path / "train.py").write_text("")
    assert [w.path for w in check_file(source, [], tmp_path).warnings] == ["time"]
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "sbatch.sh.j2").write_text("#!/bin/bash\nsrun true\n")  # a user's template that drops the trap
    built = build_file(source, [], templates, tmp_path)
    assert built.warnings[:1] == checked.warnings[:1] and len(built.warnings) > 1
    assert all(w.path != "command" for w in built.warnings)


def test_the_local_setup_warns_as_render_does(tmp_path: Path) -> None:
    """The same warning (the time limit rounded up to a minute), once the script exists: a missing script is an error
    before a local run starts (tests/cli/test_cli_compile.py) and only a warning for render."""
    source = tmp_path / "built.yaml"
    source.write_text(SPEC)
    (tmp_path / "train.py").write_text("")
    local = setup.load(source, setup.Options(), [], tmp_path)
    built = build_file(source, [], None, tmp_path)
    assert local.warnings == built.warnings and len(local.warnings) == 1
    assert local.script == built.script


def test_checking_does_not_load_jinja() -> None:
    """`validate` and `doctor` check without rendering; they must not pay for Jinja at start-up."""
    code = (
        "import sys; from slurmgen.script.build import check_file; "
        "check_file('jobs/cpu-debug.yaml', [], __import__('pathlib').Path('.')); "
        "sys.exit('jinja2' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0
