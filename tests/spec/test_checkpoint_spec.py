"""The spec's checkpoint: and resume: sections (spec/checkpoint.py): what is refused, in one line naming the file,
the field and the fix; what the script exports; and the trust rule on the checkpoint's directory."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.errors import SpecError
from slurmgen.script.build import check
from slurmgen.script.render import context
from slurmgen.spec.load import load_text

BASE = "name: x\ncommand: [python, t.py]\ntime: '10'\n"
CKPT = "checkpoint: {path: out/ckpt.pt}\n"


def refused(text: str) -> str:
    with pytest.raises(SpecError) as caught:
        load_text(BASE + text, "job.yaml")
    [problem] = caught.value.problems
    return str(problem)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            CKPT + "resume: {args: --init_from=resume}\n",
            "resume.args: is the text '--init_from=resume'; give a list of words, e.g. args: [--init_from=resume]",
        ),
        (CKPT + "resume: {args: 3}\n", "resume.args: is int 3; give a list of words, e.g. [--resume]"),
        (CKPT + "resume: {args: [--x, 1]}\n", "resume.args[1]: YAML reads `1` as a number, expected text"),
        (
            CKPT + "resume: {env: [RESUME=1]}\n",
            "resume.env: is a list; give a mapping, one NAME: value per line, e.g. env: {RESUME: 1}",
        ),
        (CKPT + "resume: {env: RESUME}\n", "resume.env: is str 'RESUME'; give a mapping"),
        (CKPT + "resume: {env: {SLURMGEN_X: 1}}\n", "resume.env.SLURMGEN_X: SLURMGEN_* variables are set by slurmgen"),
        (
            "resume: {args: [--resume]}\n",
            "resume: needs checkpoint.path, where the program saves, e.g. checkpoint: {path: out/ckpt.pt}",
        ),
        ("checkpoint: {}\n", "checkpoint.path"),
        ("checkpoint: {path: ~/ckpt.pt}\n", "~ is not expanded here"),
    ],
)
def test_bad_checkpoint_and_resume_fields_are_one_line_naming_the_file_the_field_and_the_fix(
    text: str, said: str
) -> None:
    line = refused(text)
    assert line.startswith("job.yaml:") and said in line, line
    assert "\n" not in line


def test_resume_args_and_env_are_exported_as_quoted_words_with_the_checkpoint() -> None:
    spec = load_text(BASE + CKPT + "resume: {args: [--init_from=resume, two words], env: {RESUME: 1}}\n", "j.yaml").spec
    exports = dict(context(spec)["exports"])
    assert exports[contract.CHECKPOINT] == "out/ckpt.pt"
    assert shlex.split(exports[contract.RESUME_ARGS]) == ["--init_from=resume", "two words"]
    assert shlex.split(exports[contract.RESUME_ENV]) == ["RESUME=1"]
    plain = dict(context(load_text(BASE, "j.yaml").spec)["exports"])
    assert not {contract.CHECKPOINT, contract.RESUME_ARGS, contract.RESUME_ENV} & set(plain)
    assert load_text(BASE, "j.yaml").spec.digest == load_text(BASE, "j.yaml").spec.digest  # stable
    assert "checkpoint" not in load_text(BASE, "j.yaml").spec.to_dict()  # older specs keep their digest


def test_a_checkpoint_under_a_directory_others_can_write_is_refused_naming_it(tmp_path: Path) -> None:
    loose = tmp_path / "shared"
    loose.mkdir()
    loose.chmod(0o777)
    raw = (BASE + "checkpoint: {path: shared/run/ckpt.pt}\n").encode()
    with pytest.raises(SpecError) as caught:
        check(raw, "job.yaml", [], tmp_path)
    line = str(caught.value)
    assert line.startswith("job.yaml: checkpoint.path: shared/run/ckpt.pt: its directory ") and str(loose) in line
    assert "`chmod go-w" in line and "\n" not in line
    loose.chmod(0o755)
    assert check(raw, "job.yaml", [], tmp_path).spec.checkpoint is not None
    loose.chmod(0o1777)  # sticky, as /tmp: others cannot replace what is ours
    assert check((BASE + "checkpoint: {path: 'shared/ck*.pt'}\n").encode(), "job.yaml", [], tmp_path)
