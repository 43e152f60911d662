"""A save's cost from the progress lines around it (slurmgen/save_gap.py): the gap beyond the usual time between
lines, the usual time taken only from gaps no save falls in. Synthetic lines: (seconds, step)."""

from __future__ import annotations

from slurmgen.save_gap import gap_cost


def epochs(gaps: list[float]) -> list[tuple[float, int]]:
    """One line per step, ``gaps`` seconds apart."""
    out, t = [(100.0, 0)], 100.0
    for step, gap in enumerate(gaps, 1):
        t += gap
        out.append((t, step))
    return out


def test_the_gap_beyond_the_usual_step_is_the_saves_cost() -> None:
    lines = epochs([0.5, 0.5, 2.5, 0.5, 0.6, 0.4])  # the save falls between step 2's line and step 3's
    assert gap_cost(lines, 102.2, [102.2]) == 2.0


def test_the_usual_time_is_per_step_where_lines_skip_steps() -> None:
    lines = [(0.0, 0), (1.0, 10), (2.0, 20), (5.0, 30), (6.0, 40)]  # 0.1 s a step; the save in the third gap
    assert gap_cost(lines, 3.0, [3.0]) == 2.0


def test_no_cost_without_a_line_after_the_save_or_without_gaps_free_of_saves() -> None:
    lines = epochs([0.5, 0.5, 0.5])
    assert gap_cost(lines, lines[-1][0] + 0.1, [lines[-1][0] + 0.1]) is None  # no line after it yet
    every = epochs([2.0, 2.0, 2.0, 2.0])
    saves = [every[k][0] + 1.5 for k in range(4)]  # a save in every gap: no usual time to tell it from
    assert gap_cost(every, saves[1], saves) is None
    assert gap_cost(epochs([0.5, 3.0]), 100.7, [100.7]) is None  # one gap free of it: too few


def test_a_save_within_the_usual_time_costs_nothing() -> None:
    assert gap_cost(epochs([0.5, 0.5, 0.45, 0.5, 0.5]), 101.2, [101.2]) == 0.0
