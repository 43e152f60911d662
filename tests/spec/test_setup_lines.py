"""Setup lines that change how the batch shell's own lines after them run: validate warns, naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmgen.cli.app import main
from slurmgen.spec.load import load_text
from slurmgen.spec.setup_lines import errexit_in, trapped_in

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


@pytest.mark.parametrize(
    ("line", "options"),
    [
        ("set -euo pipefail", ["set -e", "set -o pipefail"]),
        ("set -e", ["set -e"]),
        ("set -o errexit", ["set -e"]),
        ("set -ex", ["set -e"]),
        ("set -o pipefail", ["set -o pipefail"]),
        ("set +e", []),
        ("set -x", []),
        ("echo set -e", []),
    ],
)
def test_errexit_in(line: str, options: list[str]) -> None:
    assert errexit_in(line) == options


def test_a_trap_on_slurmgens_signal_is_named_with_its_line() -> None:
    found = warnings("setup:\n  - module load cuda\n  - trap 'rm -f /tmp/lock' TERM\n")
    assert found == [
        "t.yaml:6: setup[1]: `trap 'rm -f /tmp/lock' TERM` replaces slurmgen's own trap for SIGTERM, which forwards "
        "it to the step (bash keeps one trap per signal), so your program never gets it; remove the trap and handle "
        "the signal in your program"
    ]


def test_the_preemption_signal_counts_only_while_preemption_is_on() -> None:
    assert any("own trap for SIGUSR1" in w for w in warnings("setup: [trap x USR1]\n"))
    off = warnings("preemption: false\nsetup: [trap x USR1]\n")
    assert off and "own trap" not in off[0] and "the step never gets it" in off[0]


def test_exit_and_int_traps_say_what_they_do() -> None:
    exit_trap, int_trap = warnings("setup: ['trap cleanup EXIT', 'trap x INT']\n")
    assert "runs when the batch shell ends, after slurmgen's own end of the run" in exit_trap
    assert "instead of ending, and slurmgen does not forward it" in int_trap


def test_set_e_is_named_and_fails_validate_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = warnings("setup: ['set -euo pipefail']\n")
    assert [w.split(": ", 2)[1] for w in found] == ["setup[0]", "setup[0]"]
    assert "set -e stays on for slurmgen's lines after setup" in found[0]
    assert "set -o pipefail stays on" in found[1]
    spec = tmp_path / "job.yaml"
    spec.write_text(BASE.replace("train.py", "-c") + "setup: ['set -e']\n")
    assert main(["validate", str(spec)]) == 0
    assert "warning: " in capsys.readouterr().err
    assert main(["validate", "--strict", str(spec)]) == 2
    assert "set -e stays on" in capsys.readouterr().err


def test_plain_setup_lines_warn_nothing() -> None:
    assert warnings("setup: [module load cuda, source .venv/bin/activate, 'export X=1; set -x']\n") == []
