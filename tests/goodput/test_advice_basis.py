"""Too thin a basis for checkpoint-interval advice (goodput/advice_basis.py): the report says why in one line
instead of advising an interval. Synthetic run histories through `summary.report`, as `slurmgen report` makes it."""

from __future__ import annotations

from typing import Any

from slurmgen import run_history as rh
from slurmgen.goodput.advice_basis import NOT_ADVISED, UNTIMED
from slurmgen.goodput.summary import report
from slurmgen.goodput.text import report_lines


def ev(kind: str, run: int, t: float, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "event": kind, "run": run, "time": t, "by": "x", **fields}


def preempted(*saves: dict[str, Any], rehearsed: bool = False) -> list[dict[str, Any]]:
    """Run 1 from 0 s, steps from 5 s, ``saves``, a stop at 100 s and a requeue; run 2 completes at 300 s."""
    events = [ev(rh.RUN_START, 1, 0.0), ev(rh.FIRST_STEP, 1, 5.0, step=1, steps=1), *saves]
    if rehearsed:
        events.append(ev(rh.REHEARSAL, 1, 99.5, what="preempt"))
    events += [ev(rh.STOP, 1, 100.0, cause="preemption"), ev(rh.RUN_END, 1, 101.0, ended="requeued", exit_code=143)]
    events += [ev(rh.RUN_START, 2, 110.0), ev(rh.FIRST_STEP, 2, 115.0, step=50, steps=1)]
    events += [ev(rh.RUN_END, 2, 300.0, ended="completed", exit_code=0)]
    return sorted(events, key=lambda e: (e["run"], e["time"]))


def save(t: float, seconds: float | None = 2.0) -> dict[str, Any]:
    timed = {} if seconds is None else {"seconds": seconds}
    return ev(rh.SAVE, 1, t, cause="program", path="snapshot.pt", basis="progress" if timed else "unseen", **timed)


def note(events: list[dict[str, Any]]) -> str | None:
    r = report("local-1", events, 400.0)
    if r.advice_note is not None:
        assert r.advice is None and r.advice_note in report_lines(r), r  # said instead of an interval
        assert r.to_json()["advice_note"] == r.advice_note and r.to_json()["advice"] is None
    return r.advice_note


def test_two_timed_saves_and_a_real_preemption_are_enough() -> None:
    r = report("local-1", preempted(save(30.0), save(60.0)), 400.0)
    assert r.advice_note is None and r.advice is not None and r.advice.young_seconds is not None


def test_only_slurmgens_stop_and_no_save_of_the_program_is_said() -> None:
    said = note(preempted())
    assert said is not None and said.startswith(NOT_ADVISED + "no save of the program seen, only slurmgen's own stop")


def test_a_job_that_neither_saved_nor_stopped_has_nothing_to_withhold() -> None:
    events = [ev(rh.RUN_START, 1, 0.0), ev(rh.FIRST_STEP, 1, 5.0, step=1, steps=1)]
    assert note([*events, ev(rh.RUN_END, 1, 50.0, ended="completed", exit_code=0)]) is None


def test_one_save_is_too_few() -> None:
    assert note(preempted(save(30.0))) == (
        NOT_ADVISED + "one save seen: a save's cost and the interval between saves need two at least"
    )


def test_saves_none_of_them_timed_give_no_cost() -> None:
    assert note(preempted(save(30.0, None), save(60.0, None))) == UNTIMED


def test_a_rehearsed_preemption_is_no_interruption_rate() -> None:
    said = note(preempted(save(30.0), save(60.0), rehearsed=True))
    assert said == (
        NOT_ADVISED + "the only interruption was a rehearsal (slurmgen run --preempt-after, --kill-rank, "
        "--hang-rank): a moment chosen for a test says nothing of how often the job is interrupted"
    )
