"""The steps a restart inside the allocation made the program do again (run_history.steps_lost), as `slurmgen
report` and `slurmgen history` both say them: from both sides of the restart where the program says its step, else
the restart's own record. Forged run histories of the shape real ones have (the scenario engine's `pg` program)."""

from __future__ import annotations

from typing import Any

import pytest

from slurmgen import run_history as rh
from slurmgen.goodput.summary import report

T0 = 1000.0


def bug_at_12(first_after: dict[str, Any]) -> list[dict[str, Any]]:
    """A program that saves after step 10's work and before its `should_stop(step=10)` (so the save says 9 steps),
    raises at step 12, and is restarted: the restart records 12 - 9 = 3 steps lost."""
    return [
        {"event": rh.RUN_START, "run": 1, "time": T0},
        {"event": rh.FIRST_STEP, "run": 1, "time": T0 + 1.1, "step": 1, "steps": 1},
        {"event": rh.SAVE, "run": 1, "time": T0 + 2.05, "steps": 9, "cause": "periodic", "seconds": 0.01},
        {"event": rh.PROGRESS, "run": 1, "time": T0 + 2.25, "step": 12, "steps": 12, "last": True},
        {"event": rh.TASK_EXIT, "run": 1, "time": T0 + 2.3, "rank": 0, "exit_code": 1},
        {
            "event": rh.RESTART,
            "run": 1,
            "time": T0 + 3.0,
            "steps_lost": 3,
            "reached_step": 12,
            "cause": "crash",
            "who": "rank 0 on n1",
            "rank": 0,
        },
        {"event": rh.FIRST_STEP, "run": 1, "time": T0 + 8.0, **first_after},
        {"event": rh.PROGRESS, "run": 1, "time": T0 + 13.0, "step": 60, "steps": 50, "last": True},
        {"event": rh.RUN_END, "run": 1, "time": T0 + 13.1, "ended": "completed"},
    ]


def test_a_restart_redoes_the_steps_between_where_the_next_start_began_and_where_the_stopped_one_reached() -> None:
    """The next start resumed from the save of step 10 and says step 11 after one step: steps 11 and 12 were done
    again, two, not the three the restart counted from the save's `should_stop()` calls; `history` says the same."""
    events = bug_at_12({"step": 11, "steps": 1})
    assert report("local-1", events, T0 + 20).redone_steps == 2
    [text] = rh.runs(events)[0].restarts
    assert text == "crash: rank 0 on n1, 2 steps lost", text


def test_where_the_next_start_does_not_say_where_it_began_the_restarts_own_count_stands() -> None:
    """A first sample whose step is its steps (a program that started over, or one whose printed line gives both)
    tells no resume point: the restart's record counts."""
    assert report("local-1", bug_at_12({"step": 1, "steps": 1}), T0 + 20).redone_steps == 3
    assert rh.runs(bug_at_12({"step": 1, "steps": 1}))[0].restarts == ["crash: rank 0 on n1, 3 steps lost"]
    assert report("local-1", bug_at_12({"steps": 1}), T0 + 20).redone_steps == 3  # should_stop() without a step


def printed_then_killed(first_after: dict[str, Any]) -> list[dict[str, Any]]:
    """A program that never calls Preemption: it prints `STEP n` (spec section progress:), saves and resumes its
    own checkpoint every 10 steps, unwatched, and is killed at step 13; its restart saw no save, so it recorded all
    13 steps lost (the scenario engine's `own` shape)."""
    printed = {"printed": True}
    return [
        {"event": rh.RUN_START, "run": 1, "time": T0},
        {"event": rh.FIRST_STEP, "run": 1, "time": T0 + 1.0, "step": 1, "steps": 1, **printed},
        {"event": rh.PROGRESS, "run": 1, "time": T0 + 2.0, "step": 11, "steps": 11, "step_seconds": 0.1},
        {"event": rh.TASK_EXIT, "run": 1, "time": T0 + 2.3, "rank": 3, "exit_code": -9},
        {"event": rh.PROGRESS, "run": 1, "time": T0 + 2.5, "step": 13, "steps": 13, "last": True},
        {
            "event": rh.RESTART,
            "run": 1,
            "time": T0 + 3.0,
            "steps_lost": 13,
            "reached_step": 13,
            "cause": "crash",
            "who": "rank 3 on n2",
            "rank": 3,
        },
        {"event": rh.FIRST_STEP, "run": 1, "time": T0 + 8.0, **first_after},
        {"event": rh.PROGRESS, "run": 1, "time": T0 + 13.0, "step": 60, "steps": 60, "last": True},
        {"event": rh.RUN_END, "run": 1, "time": T0 + 13.1, "ended": "completed"},
    ]


def test_a_program_that_resumed_its_own_checkpoint_redoes_only_the_steps_past_it_and_only_their_time() -> None:
    """Its next start prints step 11 first: it resumed from its own save of step 10, and the steps lost are 13 - 11
    (a printed line is the step the program is at), not the 13 the restart recorded. The time redone follows the
    same point: from when the killed start was at step 11 (2.0 s) to the first task's death (2.3 s), not from its
    first step; the report, `history` and the timeline say the same."""
    events = printed_then_killed({"step": 11, "steps": 11, "printed": True})
    got = report("local-1", events, T0 + 20)
    assert got.redone_steps == 2
    assert got.buckets["redone"] == pytest.approx(0.3)
    assert rh.runs(events)[0].restarts == ["crash: rank 3 on n2, 2 steps lost"]
    # started over: its first line is step 1, all 12 steps past it are lost, and the time from its first step
    over = report("local-1", printed_then_killed({"step": 1, "steps": 1, "printed": True}), T0 + 20)
    assert over.redone_steps == 12 and over.buckets["redone"] == pytest.approx(1.3)
    # a first sample that says no printed line and no steps made before its step: the record stands, as before
    same = report("local-1", printed_then_killed({"step": 11, "steps": 11}), T0 + 20)
    assert same.redone_steps == 13 and same.buckets["redone"] == pytest.approx(1.3)
