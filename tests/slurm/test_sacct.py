"""sacct's rows and exit codes per Slurm version (tests/data/slurm/handwritten-sacct-exit-*, written from
src/sacct/print.c before and after 25.11), and the SLUID's form."""

from __future__ import annotations

from recorded import recorded_text

from slurmgen.slurm import sacct
from slurmgen.slurm.ids import parse_sluid


def test_before_25_11_a_code_may_be_128_less_and_says_so() -> None:
    rows = sacct.parse_rows(recorded_text("handwritten-sacct-exit-25.05.out"), (25, 5))
    assert [(r.job, r.state, r.exit_code, r.signal, r.exact) for r in rows] == [
        ("41", "FAILED", 3, None, False),
        ("42", "FAILED", 15, None, False),  # the job exited 143
        ("43", "CANCELLED", 0, 15, True),  # a signal is exact on every version
        ("44", "COMPLETED", 0, None, False),
    ]
    assert {r.sluid for r in rows} == {None}


def test_from_25_11_the_code_is_the_jobs_own_and_the_run_has_its_sluid() -> None:
    rows = sacct.parse_rows(recorded_text("handwritten-sacct-exit-25.11.out"), (25, 11))
    assert [(r.exit_code, r.signal, r.exact) for r in rows] == [(3, None, True), (143, None, True),
                                                                (0, 15, True), (0, None, True)]  # fmt: skip
    assert [r.sluid for r in rows] == ["s731M834YGW200", "s731M834YGXW00", "s731M834YJRE00", None]
    assert sacct.parse_rows(recorded_text("handwritten-sacct-exit-25.11.out"), (26, 5)) == rows


def test_an_unknown_version_is_not_exact() -> None:
    assert sacct.exit_field("143:0", None) == (143, None, False)
    assert sacct.exit_field("143:0", (25, 11)) == (143, None, True)
    assert sacct.exit_field("", (25, 11)) == (None, None, False)
    assert sacct.exit_field("x:0", (25, 11)) == (None, None, False)


def test_the_sluid_form() -> None:
    assert parse_sluid("s731M834YGW200") == "s731M834YGW200"
    for text in ("", "(null)", "12345", "s731M834YGW20", "s731M834YGW2000", "s731M834YGWI00", None):
        assert parse_sluid(text) is None
