"""The steps a requeue made the program do again, as `slurmgen report` counts and times them: a program that saves
and resumes its own checkpoint, unwatched, read by its printed step (spec section progress:), is preempted and
requeued; the next run's first line says where it resumed. Forged run histories of the shape real ones have (the
scenario engine's `own` program, which prints `STEP n`)."""

from __future__ import annotations

from typing import Any

import pytest

from slurmgen import run_history as rh
from slurmgen.goodput.summary import report

T0 = 1000.0


def requeued_at_35(resumed_at: int, *stop_save: dict[str, Any]) -> list[dict[str, Any]]:
    """Run 1 steps at 0.1 s a step from step 1 (at T0 + 1.0), gets the preemption's stop at T0 + 4.35 and steps on
    to 35 until the step's SIGTERM; run 2 prints ``resumed_at`` first and completes."""
    return [
        {"event": rh.RUN_START, "run": 1, "time": T0},
        {"event": rh.FIRST_STEP, "run": 1, "time": T0 + 1.0, "step": 1, "steps": 1, "printed": True},
        {"event": rh.PROGRESS, "run": 1, "time": T0 + 2.0, "step": 11, "steps": 11, "step_seconds": 0.1},
        {"event": rh.STOP, "run": 1, "time": T0 + 4.35, "cause": "preemption"},
        *stop_save,
        {"event": rh.PROGRESS, "run": 1, "time": T0 + 4.4, "step": 35, "steps": 35, "last": True},
        {"event": rh.RUN_END, "run": 1, "time": T0 + 5.0, "ended": "requeued", "requeued": True},
        {"event": rh.RUN_START, "run": 2, "time": T0 + 6.0},
        {"event": rh.FIRST_STEP, "run": 2, "time": T0 + 7.0, "step": resumed_at, "steps": 1, "printed": True},
        {"event": rh.PROGRESS, "run": 2, "time": T0 + 9.9, "step": 60, "steps": 30, "last": True},
        {"event": rh.RUN_END, "run": 2, "time": T0 + 10.0, "ended": "completed"},
    ]


def test_a_requeued_program_that_resumed_its_own_checkpoint_redoes_the_steps_past_it_and_their_time() -> None:
    """It resumed from its own save of step 30 (its first line says 31): the requeue made it do steps 31 to 35
    again, counted 35 - 31 = 4 (a printed line is the step the program is at, as for a restart), and timed from
    when run 1 was at step 31 (T0 + 4.0) to its last step after the stop (T0 + 4.4): 0.4 s, not the 3.35 s from its
    first step to the stop, and not 0 steps beside them."""
    got = report("1", requeued_at_35(31), T0 + 20)
    assert got.redone_steps == 4
    assert got.buckets["redone"] == pytest.approx(0.4)
    # started over: every step of run 1 past its first line is done again, and all their time
    over = report("1", requeued_at_35(1), T0 + 20)
    assert over.redone_steps == 34 and over.buckets["redone"] == pytest.approx(3.4)


def test_a_requeue_after_the_stops_own_save_redoes_nothing() -> None:
    """Preemption saved at the stop: the next run resumes where run 1 was, and nothing is counted or timed as
    redone, whatever its first line says."""
    saved = {"event": rh.SAVE, "run": 1, "time": T0 + 4.38, "steps": 35, "cause": "stop", "seconds": 0.01}
    got = report("1", requeued_at_35(31, saved), T0 + 20)
    assert got.redone_steps == 0 and got.buckets["redone"] == 0.0
