"""Property: any string in name, env values, command arguments or container fields is either rejected with a
clear one-line error, or reaches the process unchanged when the rendered script runs under bash with `srun` and
`python3` replaced by stubs. No injected directive, no injected command.

The srun stub records its argv and environment: srun hands argv to the tasks unchanged, so what srun receives
is what the program receives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from slurmgen import variables
from slurmgen.errors import SpecError
from slurmgen.script.directives import directives
from slurmgen.script.render import render
from slurmgen.spec.load import load_text

from .sbatch_directives import as_options, read_directives

# Text that is hostile to shells, sbatch's parser and YAML alike, mixed with anything at all.
NASTY = [
    "'",
    '"',
    "$(touch INJECTED)",
    "`touch INJECTED`",
    ";",
    "&",
    "|",
    "#",
    " ",
    "\t",
    "\\",
    "%",
    "/",
    "..",
    ":",
    "\n",
    "\r",
    "\x00",
    "\x1b",
    "ü",
    "😀",
    "#SBATCH --partition=evil",
    "*",
    "?",
    "[",
    "!",
    "~",
    "{a,b}",
    "$HOME",
    "${x}",
    "hetjob",
    "-",
    "--",
    "=",
    ",",
]
REJECTED = {"\n", "\r", "\x00", "\x1b", "\t", "\\", "hetjob"}
pieces = st.one_of(st.sampled_from(NASTY), st.text(min_size=1, max_size=6))
printable = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=6)
clean_pieces = st.one_of(st.sampled_from([p for p in NASTY if p not in REJECTED]), printable)
# Mostly values that pass validation (so they are run), sometimes anything at all (so they are rejected).
nasty_text = st.one_of(
    st.lists(clean_pieces, max_size=6).map("".join),
    st.lists(clean_pieces, max_size=6).map("".join),
    st.lists(pieces, max_size=6).map("".join),
)
# Names are mostly rejected by their pattern; draw valid ones too, or the rest would rarely be exercised.
valid_names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,20}", fullmatch=True)
names = st.one_of(valid_names, valid_names, valid_names, nasty_text)

STUB_SRUN = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys
    with open(os.environ["STUB_OUT"], "w") as f:
        json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, f)
    """
)
STUB_PYTHON = textwrap.dedent(
    """\
    #!/bin/bash
    # Stands in for python3 in the batch shell: answers the rendezvous and package queries, and the batch
    # shell's own helper (slurmgen.batch: begin records, end passes the step's exit code on).
    case "$*" in
        *--rendezvous*) echo "127.0.0.1 20000" ;;
        *slurmgen.__file__*) echo /opt/fake/slurmgen ;;
        *slurmgen.batch\\ begin*) ;;
        *slurmgen.batch\\ end*) exit "${@: -1}" ;;
        *) echo "unexpected python3 call: $*" >&2; exit 3 ;;
    esac
    """
)


def run_script(script: str, tmp: Path) -> dict[str, Any]:
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "srun").write_text(STUB_SRUN.format(python=sys.executable))
    (bindir / "python3").write_text(STUB_PYTHON)
    for stub in bindir.iterdir():
        stub.chmod(0o755)
    path = tmp / "job.sh"
    path.write_text(script)
    out = tmp / "srun.json"
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "node1",
        "STUB_OUT": str(out),
        "HOME": str(tmp),
    }
    work = tmp / "work"
    work.mkdir()
    result = subprocess.run(["bash", str(path)], cwd=work, env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert not list(tmp.rglob("INJECTED")), "a value was executed as a command"
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def spec_yaml(name: str, env_value: str, arg: str, image: str, workdir: str) -> str | None:
    doc = {
        "name": name,
        "command": ["python", "train.py", arg],
        "time": "01:00:00",
        "nodes": 1,
        "env": {"USER_VALUE": env_value},
        "container": {"image": image, "workdir": "/" + workdir},
        "distributed": {"backend": "gloo"},
    }
    try:
        return yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names, env_value=nasty_text, arg=nasty_text, image=nasty_text, workdir=nasty_text)
def test_values_are_rejected_or_arrive_unchanged(
    tmp_path_factory: pytest.TempPathFactory, name: str, env_value: str, arg: str, image: str, workdir: str
) -> None:
    text = spec_yaml(name, env_value, arg, image, workdir)
    assume(text is not None)
    assert text is not None
    try:
        loaded = load_text(text, "prop.yaml")
    except SpecError as exc:
        for problem in exc.problems:
            line = str(problem)
            assert "\n" not in line and line.startswith("prop.yaml:"), line
        event("rejected")
        return
    if any(variables.has_variables(v) for v in (env_value, arg, image)):
        event("expands ${NAME} or $$: tests/script/test_expansion.py")  # the value arrives expanded, not as written
        return
    event("rendered and run")
    spec = loaded.spec
    script = render(spec)
    # No injected directive: sbatch (by its own rules) sees exactly the options slurmgen meant.
    assert as_options(read_directives(script)) == [(d.option, d.value) for d in directives(spec)]
    got = run_script(script, tmp_path_factory.mktemp("run"))
    argv = got["argv"]
    entry = argv.index("--", argv.index("-c"))
    assert argv[entry + 1 :] == ["python", "train.py", arg]
    assert f"--container-image={image}" in argv
    assert f"--container-workdir=/{workdir}" in argv
    assert got["env"]["USER_VALUE"] == env_value
    assert got["env"]["SLURMGEN_JOB_NAME"] == name


def test_a_known_hostile_spec_is_refused_and_its_escaped_form_runs_safely(tmp_path: Path) -> None:
    hostile = "$(touch INJECTED); `touch INJECTED` 'x' \"y\" # z \\ %j"
    text = spec_yaml("ok", hostile, hostile, "img", "w")
    assert text is not None
    with pytest.raises(SpecError) as refused:
        load_text(text, "hostile.yaml")
    assert [p.path for p in refused.value.problems] == ["command[2]", "env.USER_VALUE"]
    assert all("runs a command" in str(p) for p in refused.value.problems)
    value = "$(touch INJECTED); ${HOME} 'x' \"y\" # z \\ %j ;id"  # `$$` keeps each `$` as text
    text = spec_yaml("ok", value.replace("$", "$$"), value.replace("$", "$$"), "img", "w")
    assert text is not None
    spec = load_text(text, "hostile.yaml").spec
    got = run_script(render(spec), tmp_path)
    assert got["argv"][-1] == value
    assert got["env"]["USER_VALUE"] == value
    assert os.path.basename(got["argv"][0]) != "touch"
