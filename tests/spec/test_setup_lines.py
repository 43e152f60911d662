"""Setup items the batch shell cannot make safe: a trap on slurmgen's own signal (validate warns, naming the line),
`exit` and `exec COMMAND` (refused, with the line). Blocks (`|`) run as written; `set -e` and its kind are undone
after setup (the whole runs: tests/local/test_local_setup.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmgen.cli.app import main
from slurmgen.errors import SpecError
from slurmgen.spec.load import load_text
from slurmgen.spec.setup_lines import item_problem, trapped_in

BASE = "name: t\ncommand: [python, train.py]\ntime: '01:00:00'\n"


def warnings(extra: str) -> list[str]:
    return [str(w) for w in load_text(BASE + extra, "t.yaml").warnings]


@pytest.mark.parametrize(
    ("line", "signals"),
    [
        ('trap "rm -rf /tmp/x" TERM INT', ["TERM", "INT"]),
        ("cd x && trap cleanup EXIT", ["EXIT"]),
        ("trap - 15", ["TERM"]),
        ("trap '' SIGUSR1; echo", ["USR1"]),
        ("if true; then trap x usr1; fi", ["USR1"]),
        ("trap -p", []),
        ('echo "trap x TERM"', []),
        ("module load x  # trap y TERM", []),
    ],
)
def test_trapped_in(line: str, signals: list[str]) -> None:
    assert trapped_in(line) == signals


def test_a_trap_on_slurmgens_signal_is_named_with_its_line() -> None:
    found = warnings("setup:\n  - module load cuda\n  - trap 'rm -f /tmp/lock' TERM\n")
    assert found == [
        "t.yaml:6: setup[1]: `trap 'rm -f /tmp/lock' TERM` replaces slurmgen's own trap for SIGTERM while setup "
        "runs (bash keeps one trap per signal): a signal then runs your trap instead of being recorded and forwarded "
        "to the step, and slurmgen installs its own trap again after setup, so yours never runs later; remove the "
        "trap and handle the signal in your program (cleanup: teardown)"
    ]


def test_the_preemption_signal_counts_only_while_preemption_is_on() -> None:
    assert any("own trap for SIGUSR1" in w for w in warnings("setup: [trap x USR1]\n"))
    off = warnings("preemption: false\nsetup: [trap x USR1]\n")
    assert off and "own trap" not in off[0] and "the step never gets it" in off[0]


def test_exit_and_int_traps_say_what_they_do() -> None:
    exit_trap, int_trap = warnings("setup: ['trap cleanup EXIT', 'trap x INT']\n")
    assert "runs when the batch shell ends, after slurmgen's own end of the run" in exit_trap
    assert "instead of ending, and slurmgen does not forward it" in int_trap


def test_set_e_warns_nothing_and_a_trap_fails_validate_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """set -euo pipefail cannot reach slurmgen's lines any more (the options are put back after setup): no
    warning. A trap on slurmgen's own signal still replaces slurmgen's while setup runs: validate warns, naming
    the line, and --strict fails."""
    assert warnings("setup: ['set -euo pipefail', 'set -x']\n") == []
    spec = tmp_path / "job.yaml"
    spec.write_text(BASE.replace("train.py", "-c") + "setup: ['set -e', 'trap \"echo bye\" TERM']\n")
    assert main(["validate", str(spec)]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and 'setup[1]: `trap "echo bye" TERM` replaces slurmgen\'s own trap for SIGTERM' in err
    assert main(["validate", "--strict", str(spec)]) == 2
    assert "setup[1]" in capsys.readouterr().err


def test_a_trap_inside_a_block_is_named_by_its_first_line() -> None:
    found = warnings("setup:\n  - |\n    export X=1\n    trap 'rm -f lock' USR1\n")
    assert len(found) == 1 and "setup[0]: `export X=1 ...` replaces slurmgen's own trap for SIGUSR1" in found[0]


@pytest.mark.parametrize(
    "item",
    [
        "module load x",
        "exec >setup.log 2>&1",
        "exec 3<>fifo",
        'echo "exit 1"',
        "cat <<EOF >notes.txt\nexit\nEOF",
        "cat <<-'END' >notes.txt\n\texec python x\n\tEND\necho done",
        "for i in 1 2; do\n  echo $i\ndone",
        "if [ -d venv ]; then\n  source venv/bin/activate\nfi",
        "echo a\\\\",
    ],
)
def test_items_that_the_batch_shell_runs_as_written(item: str) -> None:
    assert item_problem(item) is None


@pytest.mark.parametrize(
    ("item", "shown"),
    [
        ("pip install x || exit 1", "`pip install x || exit 1`: exit ends the batch script"),
        ("exec python train.py", "`exec python train.py`: replaces the batch shell"),
        ("if true; then\n  exit 3\nfi", "line 2 (`exit 3`): exit ends the batch script"),
        ("cat <<EOF >x\nhi\nEOF\nexit", "line 4 (`exit`): exit ends"),
        ("module load \\", "`module load \\` ends with a backslash"),
    ],
)
def test_what_would_end_the_script_early_is_refused_with_its_line(item: str, shown: str) -> None:
    problem = item_problem(item)
    assert problem is not None and problem.startswith(shown), problem
    assert "one shell line per item works too" in problem


def test_a_refused_block_names_file_field_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SpecError) as error:
        load_text(BASE + "setup:\n  - echo ok\n  - |\n    if true; then\n      exit 1\n    fi\n", "t.yaml")
    text = str(error.value)
    assert "t.yaml" in text and "setup[1]" in text and "line 2 (`exit 1`)" in text, text
    spec = tmp_path / "job.yaml"
    spec.write_text(BASE + "setup: ['exec python train.py']\nteardown: ['rm -rf scratch || exit 1']\n")
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "setup[0]" in err and "`exec python train.py`" in err, err
    # teardown runs in a subshell: its exit ends only that
    spec.write_text(BASE + "teardown: ['rm -rf scratch || exit 1']\n")
    assert main(["validate", str(spec)]) == 0


def test_plain_setup_lines_warn_nothing() -> None:
    assert warnings("setup: [module load cuda, source .venv/bin/activate, 'export X=1; set -x']\n") == []
