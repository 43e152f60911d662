"""A spec's odd bytes and odd numbers get one line that says where and what is accepted: a raw NUL or another
character YAML does not read (PyYAML's own message is two lines without a line number), and a time YAML reads as
a float (`.inf`, `1.5`), whose quoted form Slurm refuses too."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import run_slurmgen

from slurmgen.errors import SpecError
from slurmgen.slurm.times import parse_time
from slurmgen.spec.load import load_text

BASE = 'name: x\ncommand: [python3, -c, "1"]\ntime: "00:10:00"\n'


def one_line_error(text: str) -> str:
    with pytest.raises(SpecError) as raised:
        load_text(text, "x.yaml")
    (line,) = str(raised.value).splitlines()
    return line


@pytest.mark.parametrize("char", ["\x00", "\x01", "\ufffe"])
def test_a_character_yaml_does_not_read_is_one_line_with_its_line_number(char: str) -> None:
    line = one_line_error(BASE.replace('"1"', f'"a{char}b"'))
    assert line.startswith("x.yaml:2: ") and f"U+{ord(char):04X}" in line and "remove it" in line, line


def test_a_raw_nul_through_the_cli_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_bytes(BASE.replace('"00:10:00"', '"00:10:00"\x00').encode())
    done = run_slurmgen("validate", "job.yaml", cwd=tmp_path)
    assert done.returncode != 0 and done.stderr.splitlines() == [
        "error: job.yaml:3: contains the character U+0000, which YAML does not allow; remove it"
    ], done.stderr


def test_a_nul_in_a_set_value_is_one_line() -> None:
    from slurmgen.spec.yaml_source import load_override

    _, _, problems = load_override("a\x00b")
    assert [str(p) for p in problems] == ["--set: contains the character U+0000, which YAML does not allow; remove it"]


@pytest.mark.parametrize("raw", [".inf", "-.inf", ".nan", "1.5"])
def test_a_float_time_suggests_only_forms_slurm_accepts(raw: str) -> None:
    line = one_line_error(BASE.replace('"00:10:00"', raw))
    assert f'"{raw}"' not in line, line  # quoted, it is refused next
    assert line.startswith("x.yaml:3: time: "), line
    for suggested in ("90", "01:30:00", "2-00:00:00"):
        assert f'"{suggested}"' in line and parse_time(suggested), line


def test_a_whole_number_time_still_suggests_its_quoted_minutes() -> None:
    line = one_line_error(BASE.replace('"00:10:00"', "90"))
    assert '"90" for 90 minutes' in line and parse_time("90") == 5400
