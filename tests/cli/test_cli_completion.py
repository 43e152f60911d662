"""Shell completion and the CLI's frame as a user meets it: `--install-completion` into a fresh home, then bash
completing subcommands, options and job specs through the installed function, as bash itself calls it on TAB
(COMP_WORDS, COMP_CWORD); `-V`; `run --help` without the obsolete `--local`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from recorded import REPO

from .cli_setup import run

BIN = Path(sys.executable).parent  # the environment's `slurmgen` command
BASH = shutil.which("bash")


def complete(home: Path, words: list[str], cword: int) -> list[str]:
    """What bash offers for WORDS with the cursor on word CWORD, through the function `--install-completion`
    put in HOME/.bashrc."""
    assert BASH is not None
    script = (
        "source ~/.bashrc\n"
        'COMP_WORDS=("$@"); COMP_CWORD=' + str(cword) + "\n"
        '_slurmgen_completion slurmgen\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [BASH, "-c", script, "bash", *words], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_bash_completion_installs_and_completes_commands_and_options(tmp_path: Path) -> None:
    assert BASH is not None
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    # From bash, as a user types it: typer detects the shell from the parent process.
    done = subprocess.run(
        [BASH, "-c", "slurmgen --install-completion"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "bash completion installed" in done.stdout
    assert ".bash_completions/slurmgen.sh" in (tmp_path / ".bashrc").read_text()

    assert complete(tmp_path, ["slurmgen", "re"], 1) == ["render", "requeue", "resume", "resubmit", "report"]
    everything = complete(tmp_path, ["slurmgen", ""], 1)
    assert {"render", "validate", "submit", "status", "logs", "run", "history", "cancel"} <= set(everything)
    assert complete(tmp_path, ["slurmgen", "render", "jobs/cpu-debug.yaml", "--t"], 3) == ["--templates"]
    assert set(complete(tmp_path, ["slurmgen", "run", "--pre"], 2)) == {"--preempt-after", "--preempt-at-step"}


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_show_completion_prints_a_bash_function() -> None:
    assert BASH is not None
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [BASH, "-c", "slurmgen --show-completion"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "complete -o default -F _slurmgen_completion slurmgen" in done.stdout


def test_dash_v_is_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    from slurmgen import __version__

    for flag in ("-V", "--version"):
        code, out, err = run(capsys, flag)
        assert (code, out, err) == (0, f"slurmgen {__version__}\n", "")


def test_run_help_does_not_show_the_obsolete_local_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "--help")
    assert code == 0 and "--local" not in out and "[default: True]" not in out


def test_the_command_list_shows_every_summary_whole_in_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person reads whole summaries: click cut 11 of 13 with "..." (a first sentence too long for the column)."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "--help")
    commands = out.split("Commands:", 1)[1].splitlines()[1:]
    assert code == 0 and len([c for c in commands if c.strip()]) == 14, out
    assert not [c for c in commands if "..." in c], out


def test_cancel_to_says_what_each_value_does_and_a_bad_one_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cancel", "--help")
    text = " ".join(out.split())
    assert code == 0 and "batch (the batch shell only;" in text and "steps (the tasks of the running steps" in text
    code, _, err = run(capsys, "cancel", "7", "--signal", "USR2", "--to", "everyone")
    assert code == 2 and err.startswith("error: --to everyone: choose batch (the batch shell only;"), err
    assert "steps (" in err and "or all (the batch shell and every task directly)" in err


def test_doctors_help_speaks_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "doctor", "--help")
    text = " ".join(out.split())
    assert code == 0 and "mode, grace, user signal, windows" not in text
    assert "how long it has to save before it is killed" in text
