"""The program's own saves in `slurmgen report` (goodput/program_saves.py) and in the run summary `history` and
`status` read: pure functions of a run history, built here as plain events."""

from __future__ import annotations

from typing import Any

from slurmgen import run_history as rh
from slurmgen.goodput.advice_basis import UNTIMED
from slurmgen.goodput.summary import report
from slurmgen.goodput.text import report_lines
from slurmgen.progress_mark import MARK_PERIOD


def ev(kind: str, run: int, t: float, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "event": kind, "run": run, "time": t, "by": "x", **fields}


def samples(run: int, start: float, first: int, until: float) -> list[dict[str, Any]]:
    """Progress every second at 10 steps a second from ``first``."""
    out = [ev(rh.FIRST_STEP, run, start, step=first, steps=0)]
    t = start + 1.0
    while t <= until:
        out.append(ev(rh.PROGRESS, run, t, step=first + round((t - start) * 10), steps=0))
        t += 1.0
    return out


def history() -> list[dict[str, Any]]:
    """Run 1: a crash at 50 s (last program save at 30 s, step 200), a restart that resumes at 200 and is preempted
    at 90 s (last save at 80 s, step 300 + ...); run 2 starts over at 0: the watch said so."""
    events = [ev(rh.RUN_START, 1, 0.0), *samples(1, 10.0, 0, 49.0)]
    events += [ev(rh.SAVE, 1, 30.0, cause="program", path="out/ckpt.pt", basis="unseen")]
    events += [ev(rh.TASK_EXIT, 1, 50.0, rank=1), ev(rh.RESTART, 1, 52.0, cause="crash", who="rank 1")]
    events += samples(1, 60.0, 200, 90.0)
    events += [ev(rh.SAVE, 1, 80.0, cause="program", path="out/ckpt.pt", basis="write", seconds=2.0)]
    events += [ev(rh.STOP, 1, 90.0, cause="preemption"), ev(rh.RUN_END, 1, 91.0, ended="requeued", exit_code=143)]
    line = "run 2 started at step 0 although out/ckpt.pt (saved 00:01:20, run 1, step 400) exists: give it resume.args"
    events += [ev(rh.RUN_START, 2, 100.0), *samples(2, 110.0, 0, 120.0), ev(rh.CHECKPOINT_IGNORED, 2, 110.5, line=line)]
    return sorted(events, key=lambda e: (e["run"], e["time"]))


def test_each_stop_loses_the_work_since_the_programs_last_save_not_since_the_runs_start() -> None:
    shown = report("local-1", history(), 130.0).to_json()["program_checkpoint"]
    assert (shown["saves"], shown["timed"], shown["mean_seconds"], shown["bases"]) == (
        2, 1, 2.0, {"unseen": 1, "write": 1}
    )  # fmt: skip
    crash, preemption = shown["stops"]
    assert (crash["kind"], crash["lost_seconds"], crash["lost_steps"]) == ("restart", 20.0, 200)
    assert (preemption["kind"], preemption["lost_seconds"], preemption["lost_steps"]) == ("requeue", 10.0, 100)
    [ignored] = shown["ignored"]
    assert ignored.startswith("run 2 started at step 0 although out/ckpt.pt")


def test_the_report_says_the_saves_the_losses_and_the_silent_restart_and_advises_only_on_a_timed_save() -> None:
    lines = report_lines(report("local-1", history(), 130.0))
    assert "program saves: 2, 2.0 s each on average (1 timed: 1 by write)" in lines
    assert "run 1 restart: 20.0 s lost, 200 steps (back to the program's last save)" in lines
    assert any(line.startswith("! run 2 started at step 0 although out/ckpt.pt") for line in lines)
    assert "checkpoint interval:" in lines  # a timed save: Young/Daly have a cost to work with
    untimed = [e for e in history() if not (e["event"] == rh.SAVE and e.get("seconds"))]
    untimed_lines = report_lines(report("local-1", untimed, 130.0))
    assert UNTIMED in untimed_lines and "checkpoint interval:" not in untimed_lines


def test_the_run_summary_keeps_the_silent_restart_line_for_history_and_status() -> None:
    runs = rh.runs(history())
    assert runs[0].checkpoint_ignored == []
    [line] = runs[1].checkpoint_ignored
    assert line.startswith("run 2 started at step 0 although out/ckpt.pt") and line.endswith("give it resume.args")


def test_the_steps_done_again_count_back_to_where_the_next_start_resumed_when_the_program_says_its_step() -> None:
    """A program whose save of step K's end resumes at K (pytorch/examples' multinode.py: EPOCHS_RUN=K, epoch K
    done again): the save at 30 s falls at step 200 by the samples, the next run's first line says 190, and the
    run stopped at step 400. The steps done again are 400 - 190, not 400 - 200. A start at step 0 is no resume
    from that save: the count stays back to the save (its silent loss is said apart)."""
    events = [ev(rh.RUN_START, 1, 0.0), *samples(1, 10.0, 0, 50.0)]
    events += [ev(rh.SAVE, 1, 30.0, cause="program", path="snapshot.pt", basis="unseen")]
    events += [ev(rh.STOP, 1, 50.0, cause="preemption"), ev(rh.RUN_END, 1, 51.0, ended="requeued", exit_code=143)]
    for first, lost in ((190, 210), (0, 200)):
        later = [ev(rh.RUN_START, 2, 60.0), *samples(2, 70.0, first, 80.0)]
        [stop] = report("local-1", events + later, 90.0).to_json()["program_checkpoint"]["stops"]
        assert stop["lost_steps"] == lost, (first, stop)


def test_a_preemption_programs_restart_counts_back_to_the_step_before_its_first_sample() -> None:
    """A Lightning program (SlurmgenPreemption: should_stop(step=global_step) after each step) saves at step 20
    (11 s) and is killed at step 28 (12 s). The restarted start resumes from 20: its first sample, after one step,
    says step 21 with 1 step made. The steps done again are 21..28, 8 of them, not 28 - 21 = 7; and 8 step times
    are what the timeline paints as redone."""
    events = [ev(rh.RUN_START, 1, 0.0), ev(rh.FIRST_STEP, 1, 9.1, step=1, steps=1)]
    events += [ev(rh.PROGRESS, 1, 10.0, step=10, steps=10, step_seconds=0.1)]
    events += [ev(rh.SAVE, 1, 11.0, cause="program", path="ckpts", basis="unseen")]
    events += [ev(rh.PROGRESS, 1, 11.8, step=28, steps=28, step_seconds=0.1)]
    events += [ev(rh.TASK_EXIT, 1, 11.8, rank=1, signal="KILL"), ev(rh.RESTART, 1, 14.0, cause="crash", who="rank 1")]
    events += [ev(rh.FIRST_STEP, 1, 20.1, step=21, steps=1), ev(rh.PROGRESS, 1, 24.0, step=60, steps=40, last=True)]
    events += [ev(rh.FINISHED, 1, 24.0), ev(rh.RUN_END, 1, 25.0, ended="completed", exit_code=0)]
    shown = report("local-1", events, 30.0).to_json()
    [crash] = shown["program_checkpoint"]["stops"]
    assert (crash["kind"], crash["lost_steps"]) == ("restart", 8)
    assert shown["redone_steps"] == 8
    assert abs(shown["buckets"]["redone"] - 8 * 0.1) < 1e-6


def test_a_killed_programs_steps_lost_go_on_from_its_node_mark_for_as_long_as_the_mark_can_lag() -> None:
    """Rank 0 makes 10 steps a second and is killed at 19.25 s, its last save at step 20 (19.0 s). Its node mark,
    written at most every MARK_PERIOD (a tenth of a second), last said step 21 at 19.15 s, and its supervisor
    recorded that as its last sample: the program went on for the 0.1 s to the kill, so the steps lost are
    21 + 1 - 20 = 2, not 1. A mark older than MARK_PERIOD counts for that long only."""
    assert MARK_PERIOD == 0.1
    for killed, lost in ((19.25, 2), (25.0, 2)):
        events = [ev(rh.RUN_START, 1, 0.0), ev(rh.FIRST_STEP, 1, 17.0, step=1, steps=1)]
        events += [ev(rh.PROGRESS, 1, 18.15, step=11, steps=11, step_seconds=0.1)]
        events += [ev(rh.SAVE, 1, 19.0, cause="program", path="ckpts", basis="unseen")]
        events += [ev(rh.PROGRESS, 1, 19.15, step=21, steps=21, last=True, from_mark=True)]
        events += [ev(rh.TASK_EXIT, 1, killed, rank=0, signal="KILL")]
        events += [ev(rh.RESTART, 1, killed + 1, cause="crash", who="rank 0")]
        events += [ev(rh.FIRST_STEP, 1, killed + 5, step=21, steps=1)]
        events += [ev(rh.PROGRESS, 1, killed + 9, step=60, steps=40, last=True), ev(rh.FINISHED, 1, killed + 9)]
        events += [ev(rh.RUN_END, 1, killed + 10, ended="completed", exit_code=0)]
        [crash] = report("local-1", events, killed + 20).to_json()["program_checkpoint"]["stops"]
        assert crash["lost_steps"] == lost, (killed, crash)


def test_a_hung_programs_steps_lost_end_at_its_last_marked_step_not_at_the_rate_times_the_hang() -> None:
    """A hang at 40 s (step 300), the last save at 30 s (step 200), killed by the watchdog at 70 s: its
    supervisor recorded the node mark's step as the start's last sample. The steps lost are the 100 after the save,
    not 400 more at the last rate through the 40 s of the hang; the seconds lost still run to the kill."""
    events = [ev(rh.RUN_START, 1, 0.0), *samples(1, 10.0, 0, 39.0)]
    events += [ev(rh.SAVE, 1, 30.0, cause="program", path="out/ckpt.pt", basis="unseen")]
    events += [ev(rh.PROGRESS, 1, 40.0, step=300, steps=300, last=True, from_mark=True)]
    events += [ev(rh.HANG, 1, 69.0, rank=0, progressed=40.8), ev(rh.TASK_EXIT, 1, 70.0, rank=0, signal="KILL")]
    events += [ev(rh.RESTART, 1, 71.0, cause="hang", who="rank 0"), *samples(1, 75.0, 200, 90.0)]
    events += [ev(rh.FINISHED, 1, 90.0), ev(rh.RUN_END, 1, 91.0, ended="completed", exit_code=0)]
    shown = report("local-1", sorted(events, key=lambda e: e["time"]), 100.0).to_json()
    [hang] = shown["program_checkpoint"]["stops"]
    assert (hang["kind"], hang["lost_seconds"], hang["lost_steps"]) == ("restart", 40.0, 100)
    # the watchdog saw the last output at its poll 0.8 s after the last step: the work done again ends at the step
    assert (shown["buckets"]["redone"], shown["buckets"]["hang"]) == (10.0, 29.0)
