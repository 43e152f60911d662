"""`${NAME}` in the script (slurmgen/script/expansion.py): render shows the expansions, never values; the batch shell
expands a job-wide name and each task a per-task one; `$${...}` stays literal; `$(...)` never gets near a script.
The values' own rules are tests/test_variables.py; the whole runs tests/local/test_local_args_variables.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from slurmgen.cli.app import main
from slurmgen.errors import SpecError
from slurmgen.script.render import render
from slurmgen.script.step import step_words
from slurmgen.spec.load import load_text

BASE = "name: t\ntime: '10'\npreemption: false\n"


def script(extra: str) -> str:
    return render(load_text(BASE + extra, "t.yaml").spec)


def test_render_shows_the_expansion_not_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "99")  # the submitting shell's value must not leak into the script
    text = script("command: [python, t.py]\nenv: {OMP_NUM_THREADS: '${SLURM_CPUS_PER_TASK}', D: '${DATA:-/tmp/d}'}\n")
    assert 'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK}"\n' in text
    assert 'export D="${DATA:-/tmp/d}"\n' in text
    assert "99" not in text


def test_a_per_task_name_is_left_for_the_task_and_named_in_its_flags() -> None:
    spec = load_text(BASE + "command: [python, t.py, '--rank=${SLURM_PROCID}', '--n=${N}']\n"
                     "env: {TAG: 'r${RANK}'}\n", "t.yaml").spec  # fmt: skip
    words = step_words(spec)
    entry = words.index("slurmgen.task")
    assert words[entry + 1 : entry + 4] == ["--expand-env=TAG=r${RANK}", "--expand=2", "--"]
    assert words[-2:] == ["--rank=${SLURM_PROCID}", "'--n='\"${N}\""]  # the task's, as written; the shell's
    assert "export TAG" not in render(spec)  # set by each task, not by the batch shell


def test_the_batch_shell_expands_the_words_and_keeps_the_literals(tmp_path: Path) -> None:
    """The env lines of a rendered script, run by bash: a variable comes from the job, `$${X}` stays `${X}`, and
    a value with quotes, `;` and a space is one word."""
    text = script("command: [python, t.py]\nenv: {A: '${SLURM_JOB_ID}-${MISSING:-dflt}', B: '$${HOME}', "
                  "C: 'it''s; \"q\" $$(id)'}\n")  # fmt: skip
    exports = [line for line in text.splitlines() if line.startswith(("export A=", "export B=", "export C="))]
    probe = tmp_path / "probe.sh"
    probe.write_text("\n".join([*exports, 'printf "%s\\n" "$A" "$B" "$C"']) + "\n")
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "42", "HOME": "/nowhere"}
    done = subprocess.run(["bash", str(probe)], env=env, capture_output=True, text=True, check=True, timeout=30)
    assert done.stdout.splitlines() == ["42-dflt", "${HOME}", 'it\'s; "q" $(id)']


@pytest.mark.parametrize("runtime", ["apptainer", "singularity", "enroot"])
def test_an_image_path_from_a_variable_is_taken_as_the_batch_shell_will_expand_it(runtime: str) -> None:
    """`${SCRATCH}/x.sif` cannot be judged absolute before the batch shell expands it: it renders expanded there,
    while a relative path without a variable is still refused."""
    text = script(f"command: [python, t.py]\ncontainer: {{runtime: {runtime}, image: '${{SCRATCH}}/img.sif'}}\n")
    assert '"${SCRATCH}"' in text and "/img.sif" in text
    with pytest.raises(SpecError, match=r"container\.image"):
        script(f"command: [python, t.py]\ncontainer: {{runtime: {runtime}, image: img.sif}}\n")


def test_image_and_mounts_expand_in_the_batch_shell() -> None:
    text = script("command: [python, t.py]\ncontainer: {image: '${HOME}/img.sqsh', mounts: ['${PWD}:/workspace']}\n")
    assert "'--container-image='\"${HOME}\"'/img.sqsh'" in text
    assert '--container-mounts="${_sg_pkg}:' in text and "','\"${PWD}\"':/workspace'" in text


def test_a_sweep_placeholder_and_a_variable_share_a_word() -> None:
    spec = load_text(BASE + "command: [python, t.py, '--out=${SCRATCH}/{lr}', '--rank-dir={lr}/${RANK}']\n"
                     "sweep: {grid: {lr: [0.1, 0.2]}}\n", "t.yaml").spec  # fmt: skip
    words = step_words(spec)
    assert words[-2] == "'--out='\"${SCRATCH}\"'/'\"${_sg_p_lr}\""
    # for the task: a value's `$` doubled, so the task reads the sweep's value as text
    assert words[-1] == "'--rank-dir='\"${_sg_p_lr//\\$/\\$\\$}\"'/''${RANK}'"


def test_a_command_substitution_is_refused_in_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(BASE + "command: [python, t.py, '--who=$(id)']\n")
    assert main(["render", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"error: {path}:4: command[2]: '--who=$(id)': $(...) runs a command")
    path.write_text(BASE + "command: [python, t.py]\n")
    assert main(["render", str(path), "--", "ok", "`id`"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --: args[1]: '`id`': a backtick runs a command")


def test_render_appends_the_arguments_after_the_double_dash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(BASE + "command: python t.py --fixed\n")
    assert main(["render", str(path), "--", "--lr", "3e-4", "two words", "a;b", "$5"]) == 0
    out = capsys.readouterr().out
    assert "'python' 't.py' '--fixed' '--lr' '3e-4' 'two words' 'a;b' '$5' &\n" in out


def test_a_bare_variable_warns_with_its_braced_spelling_and_fails_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(BASE + "command: [python, t.py, '--data=$SCRATCH/x']\n")
    assert main(["validate", str(path)]) == 0
    assert "command[2]: $SCRATCH is not expanded" in capsys.readouterr().err
    assert main(["validate", "--strict", str(path)]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "$SCRATCH" in x]
    assert "write ${SCRATCH} to have it expanded" in line and line.endswith("(--strict)")
