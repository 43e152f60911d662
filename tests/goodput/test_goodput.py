"""The report's numbers from constructed run histories: every bucket where it belongs, the tiling (productive plus
buckets is the wall), the redone steps as the restarts recorded them, Slurm's queue wait, and the advice against
Young's and Daly's formulas computed here by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from slurmgen import run_history as rh
from slurmgen.goodput import advice, live, summary, text, timeline

T0 = 1_790_000_000.0


def ev(event: str, run: int, t: float, by: str = "rank0", **fields: Any) -> dict[str, Any]:
    return {"v": 1, "event": event, "run": run, "time": T0 + t, "by": by, **fields}


def crash_hang_preempt() -> list[dict[str, Any]]:
    """Run 1 (0-1000): start-up 20 s (5 s of it a restore), a periodic save at 200 (10 s), a crash at 300 (task
    exit) restarted at 310 (30 steps lost), first step again at 330, a hang: last progress 500, verdict 560,
    restarted at 570 (12 steps lost), first step 590, save at 800 (10 s), preempted at 900, saved at the stop 915,
    run ends 1000. Queue 1000-1100. Run 2 (1100-2000): first step 1120, finished 1990, ends 2000."""
    return [
        ev(
            rh.RUN_START,
            1,
            0,
            "batch-shell",
            queue={"submit": T0 - 60, "eligible": T0 - 60, "start": T0, "limit": 3600},
        ),
        ev(rh.LOAD, 1, 15, seconds=5.0),
        ev(rh.FIRST_STEP, 1, 20, steps=1),
        ev(rh.SAVE, 1, 200, seconds=10.0, cause="periodic", steps=100),
        ev(rh.TASK_EXIT, 1, 300, "task-1", rank=1, exit_code=-9),
        ev(rh.RESTART, 1, 310, "batch-shell", cause="crash", who="rank 1", steps_lost=30, lost_seconds=110.0),
        ev(rh.FIRST_STEP, 1, 330, steps=1),
        ev(rh.PROGRESS, 1, 400, steps=40, step_seconds=1.0),
        ev(rh.HANG, 1, 560, "task-0", rank=0, progressed=T0 + 500),
        ev(rh.RESTART, 1, 570, "batch-shell", cause="hang", who="rank 0", steps_lost=12, lost_seconds=240.0),
        ev(rh.FIRST_STEP, 1, 590, steps=1),
        ev(rh.SAVE, 1, 800, seconds=10.0, cause="periodic", steps=100),
        ev(rh.PREEMPTED, 1, 900, "batch-shell"),
        ev(rh.STOP, 1, 901, cause=rh.PREEMPTION, step_seconds=1.0),
        ev(rh.SAVE, 1, 915, seconds=10.0, cause=rh.PREEMPTION, steps=150),
        ev(rh.REQUEUE, 1, 930, "slurm", cause=rh.PREEMPTION),
        ev(rh.RUN_END, 1, 1000, "batch-shell", exit_code=0, ended="requeued"),
        ev(rh.RUN_START, 2, 1100, "batch-shell", queue={"submit": T0 + 1000, "start": T0 + 1100}),
        ev(rh.FIRST_STEP, 2, 1120, steps=1),
        ev(rh.FINISHED, 2, 1990),
        ev(rh.RUN_END, 2, 2000, "batch-shell", exit_code=0, ended="completed"),
    ]


def test_each_stretch_goes_to_its_bucket_and_they_tile_the_wall() -> None:
    r = summary.report("1", crash_hang_preempt(), now=T0 + 5000)
    assert r.wall_seconds == pytest.approx(2000)
    assert dict(r.buckets) == pytest.approx({
        "queue": 100,  # 1000-1100
        "startup": 15 + 20 + 20 + 20,  # run 1: 0-15 (then the restore), restarts: 310-330, 570-590; run 2: 1100-1120
        "save": 30,
        "restore": 5,
        "redone": (300 - 200) + (500 - 330),  # crash: from the save to the exit; hang: from the restart's first step
        "recovery": 10 + 10,  # 300-310 (exit to restart), 560-570 (verdict to restart)
        "hang": 60,  # 500-560
        "other": (1000 - 901 - 10) + 10,  # the stop to the run's end (less the save); finished to the end
    })  # fmt: skip
    assert r.productive_seconds + sum(r.buckets.values()) == pytest.approx(r.wall_seconds)
    assert r.redone_steps == 30 + 12
    assert r.queue_seconds == 60  # Slurm's StartTime - SubmitTime of the first run
    assert r.goodput == pytest.approx(r.productive_seconds / 2000)
    assert r.goodput_with_queue == pytest.approx(r.productive_seconds / 2060)
    kinds = [m.kind for m in r.timeline.markers]
    assert kinds == ["save", "crash", "hang", "save", "preemption", "save", "requeue"]


def test_a_preemption_whose_signal_was_never_recorded_is_marked_from_slurms_requeue() -> None:
    """Under load Slurm's SIGKILL can follow its SIGTERM before the batch shell records the preemption: the next
    run's record of Slurm's requeue (cause preemption) still marks it, where the preempted run's record ends."""
    events = [e for e in crash_hang_preempt() if e["event"] not in (rh.PREEMPTED, rh.STOP) and e["time"] < T0 + 916]
    events += [ev(rh.RUN_START, 2, 1100, "batch-shell"), ev(rh.REQUEUE, 1, 1101, "slurm", cause=rh.PREEMPTION)]
    markers = summary.report("1", events, now=T0 + 1200).timeline.markers
    assert [(m.kind, m.time - T0) for m in markers if m.kind in ("preemption", "requeue")] == [
        ("preemption", 915),
        ("requeue", 1101),
    ]
    other = [e for e in events if e["event"] != rh.REQUEUE]  # a requeue of unknown cause marks no preemption
    assert "preemption" not in [m.kind for m in summary.report("1", other, now=T0 + 1200).timeline.markers]


def test_a_run_that_goes_on_ends_now_and_a_lost_run_redoes_its_work_after_the_last_save() -> None:
    events = [
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 10),
        ev(rh.SAVE, 1, 50, seconds=5.0, cause="periodic"),
        ev(rh.TASK_EXIT, 1, 80, "task-0"),
        ev(rh.RUN_END, 1, 90, "batch-shell", exit_code=1, ended="failed"),
        ev(rh.RUN_START, 2, 150, "batch-shell"),
        ev(rh.FIRST_STEP, 2, 170),
        *(ev(rh.PROGRESS, 2, t, steps=t - 170, step_seconds=1.0) for t in (171, 173, 177, 185)),
    ]
    r = summary.report("1", events, now=T0 + 200)
    assert r.running and r.wall_seconds == pytest.approx(200)
    assert r.buckets["redone"] == pytest.approx(30)  # 50-80
    assert r.buckets["recovery"] == pytest.approx(10)  # 80-90
    assert r.buckets["queue"] == pytest.approx(60)
    assert r.productive_seconds == pytest.approx(35 + 30)  # 10-45 and 170-200
    assert r.productive_seconds + sum(r.buckets.values()) == pytest.approx(200)


@pytest.mark.parametrize(("c", "m"), [(60.0, 9000.0), (10.0, 3600.0), (300.0, 86400.0), (100.0, 40.0)])
def test_young_and_daly_as_published(c: float, m: float) -> None:
    assert advice.young(c, m) == pytest.approx(math.sqrt(2 * c * m))
    expected = m if c >= 2 * m else math.sqrt(2 * c * m) * (1 + math.sqrt(c / (2 * m)) / 3 + c / (18 * m)) - c
    assert advice.daly(c, m) == pytest.approx(expected)


def test_the_issues_example_a_60_s_save_at_2_5_h_gives_17_minutes() -> None:
    assert advice.young(60, 2.5 * 3600) / 60 == pytest.approx(17.3, abs=0.1)


def test_daly_optimum_maximises_the_expected_goodput() -> None:
    c, m, r = 60.0, 9000.0, 120.0
    best = advice.daly(c, m)
    at = advice.expected_goodput(best, c, m, r)
    assert at >= max(advice.expected_goodput(t, c, m, r) for t in (best * 0.5, best * 0.8, best * 1.25, best * 2))
    assert advice.expected_goodput(600, c, None) == pytest.approx(600 / 660)  # no interruption: saving alone


def test_advice_from_a_constructed_history_uses_its_save_cost_and_interruption_rate() -> None:
    r = summary.report("1", crash_hang_preempt(), now=T0 + 5000)
    a = r.advice
    assert a is not None
    assert a.save_seconds == pytest.approx(10.0)
    assert a.interruptions == 3  # a crash, a hang, a preemption
    assert a.mtbf_seconds is not None and a.daly_seconds is not None
    assert a.mtbf_seconds == pytest.approx((1000 + 900) / 3)
    assert a.young_seconds == pytest.approx(math.sqrt(2 * 10 * a.mtbf_seconds))
    assert a.daly_seconds == pytest.approx(advice.daly(10.0, a.mtbf_seconds))
    assert a.interval_seconds is None  # never two periodic saves in one start of the program
    assert a.time_limit_seconds == 3600 and a.last_save_by_seconds == pytest.approx(3600 - 10 - 1)
    assert a.goodput_optimum == pytest.approx(advice.expected_goodput(a.daly_seconds, 10.0, a.mtbf_seconds,
                                                                      a.restart_seconds))  # fmt: skip


def test_json_has_the_documented_keys() -> None:
    data = summary.report("1", crash_hang_preempt(), now=T0 + 5000).to_json()
    for key in ("goodput", "wall_seconds", "productive_seconds", "buckets", "queue_seconds"):
        assert key in data
    assert set(data["buckets"]) == set(timeline.BUCKETS)
    total = data["productive_seconds"] + sum(data["buckets"].values())
    assert abs(total - data["wall_seconds"]) <= 0.01 * data["wall_seconds"]


def unstepped() -> list[dict[str, Any]]:
    """A program without Preemption and without progress.pattern: run 1 (0-300) crashes at 200 (task exit) and is
    restarted at 210; it is preempted and requeued at 300 by the batch shell; queue 300-400; run 2 (400-900)."""
    return [
        ev(rh.RUN_START, 1, 0, "batch-shell", queue={"start": T0, "limit": 3600}),
        ev(rh.TASK_EXIT, 1, 200, "task-0", rank=0, exit_code=1),
        ev(rh.RESTART, 1, 210, "batch-shell", cause="crash", who="rank 0"),
        ev(rh.STOP, 1, 290, "batch-shell", cause=rh.PREEMPTION),
        ev(rh.REQUEUE, 1, 295, "batch-shell", cause=rh.PREEMPTION),
        ev(rh.RUN_END, 1, 300, "batch-shell", exit_code=0, ended="requeued"),
        ev(rh.RUN_START, 2, 400, "batch-shell", queue={"start": T0 + 400}),
        ev(rh.RUN_END, 2, 900, "batch-shell", exit_code=0, ended="completed"),
    ]


def test_a_program_whose_steps_were_never_recorded_has_an_unknown_progress_and_no_pretended_buckets() -> None:
    from slurmgen.goodput import html, text

    r = summary.report("7", unstepped(), now=T0 + 5000)
    data = r.to_json()
    assert data["progress_known"] is False
    assert (data["goodput"], data["goodput_with_queue"], data["productive_seconds"]) == (None, None, None)
    # what Slurm and the batch shell saw stays: the queue between runs, the gap after the crash; the rest is unknown
    assert data["buckets"] == {"queue": 100.0, "recovery": 10.0, "unknown": 790.0}
    assert {s[3] for s in data["segments"]} == {"queue", "recovery", "unknown"}
    lines = text.report_lines(r)
    [said] = [line for line in lines if "progress is unknown" in line]
    assert said == lines[1] and "progress.pattern" in said and "goodput" not in lines[1].split(";")[0]
    assert not any(line.startswith(("goodput", "productive", "start-up")) for line in lines), lines
    page = html.job_page([r])
    assert 'id="progress-unknown"' in page and 'id="goodput"' not in page and "start-up to first step" not in page
    known = summary.report("7", [*unstepped()[:1], ev(rh.HANDLER, 1, 5, handler="runtime"), *unstepped()[1:]],
                           now=T0 + 5000)  # fmt: skip
    assert known.progress_known and known.to_json()["goodput"] == 0.0  # Preemption ran: no step is a fact


def two_points() -> summary.SweepReport:
    """Point 0 crashed, hung, was preempted and finished (2 runs, 2 restarts); point 1 still runs its first."""
    one = summary.report("1_0", crash_hang_preempt(), now=T0 + 5000)
    two = summary.report("1_1", crash_hang_preempt()[:4], now=T0 + 250)
    return summary.SweepReport("1", [(0, one), (1, two)], {0: {"lr": 0.1}, 1: {"lr": 0.2}}, {0: "lr=0.1", 1: "lr=0.2"})


def test_a_sweeps_roll_up_sums_its_points_and_shows_each_points_values_and_outcome() -> None:
    s = two_points()
    (_, one), (_, two) = s.points
    data = s.to_json()
    assert data["wall_seconds"] == pytest.approx(one.wall_seconds + two.wall_seconds)
    assert data["productive_seconds"] == pytest.approx(one.productive_seconds + two.productive_seconds)
    assert data["goodput"] == pytest.approx(data["productive_seconds"] / data["wall_seconds"])
    for bucket in timeline.BUCKETS:
        assert data["buckets"][bucket] == pytest.approx(one.buckets[bucket] + two.buckets[bucket], abs=0.002)
    # the totals tile the summed wall, as one job's buckets tile its wall
    assert data["productive_seconds"] + sum(data["buckets"].values()) == pytest.approx(data["wall_seconds"], abs=0.01)
    assert (data["run_count"], data["requeues"], data["restarts"], data["redone_steps"]) == (2 + 1, 1, 2, 42)
    assert data["outcomes"] == {"completed": 1, "running": 1} and data["running"] is True
    points = data["points"]
    assert set(points) == {"0", "1"}
    assert (points["0"]["values"], points["0"]["outcome"], points["0"]["requeues"], points["0"]["restarts"]) == (
        {"lr": 0.1}, "completed", 1, 2)  # fmt: skip
    assert (points["1"]["values"], points["1"]["outcome"], points["1"]["running"]) == ({"lr": 0.2}, "running", True)
    assert "segments" not in points["0"] and "markers" not in points["0"]  # the roll-up leaves those out


def test_a_sweeps_table_has_a_row_per_point_and_the_totals() -> None:
    lines = text.sweep_lines(two_points())
    head = next(k for k, line in enumerate(lines) if line.startswith("POINT"))
    assert lines[head].split() == ["POINT", "VALUES", "OUTCOME", "RUNS", "REQUEUES", "RESTARTS", "WALL",
                                   "PRODUCTIVE", "GOODPUT"]  # fmt: skip
    assert lines[head + 1].split()[:6] == ["0", "lr=0.1", "completed", "2", "1", "2"]
    assert lines[head + 2].split()[:6] == ["1", "lr=0.2", "running", "1", "0", "0"]
    total = lines[head + 3].split()
    assert total[0] == "total" and "2000.0" not in total and total[-1] == f"{two_points().goodput:.1%}"
    assert any(line.startswith("redone steps: 42 ") for line in lines)
    assert any(line.startswith("wall (the points' sum)") for line in lines)


def test_the_redone_stretch_starts_at_what_was_kept_by_a_completed_step_or_a_save_at_the_failure() -> None:
    """Spec field steps: a step that completed is not done again, so a later step's crash redoes its own work only;
    a save at or after the failure (the stop's own save) leaves nothing to redo."""
    steps = [
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 10),
        ev(rh.STEP_DONE, 1, 100, "batch-shell", index=0),
        ev(rh.FIRST_STEP, 1, 110),
        ev(rh.TASK_EXIT, 1, 150, "task-0"),
        ev(rh.RUN_END, 1, 160, "batch-shell", exit_code=1, ended="failed"),
        ev(rh.RUN_START, 2, 200, "batch-shell"),
        ev(rh.FIRST_STEP, 2, 210),
    ]
    r = summary.report("1", steps, now=T0 + 250)
    assert r.buckets["redone"] == pytest.approx(150 - 110)  # before: 140, from the first step of step 1
    saved = [
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 10),
        ev(rh.TASK_EXIT, 1, 80, "task-1", rank=1),
        ev(rh.SAVE, 1, 85, seconds=2.0, cause="requested"),
        ev(rh.RESTART, 1, 90, "batch-shell", cause="crash"),
        ev(rh.FIRST_STEP, 1, 100),
        ev(rh.FINISHED, 1, 120),
        ev(rh.RUN_END, 1, 125, "batch-shell", exit_code=0, ended="completed"),
    ]
    assert summary.report("1", saved, now=T0 + 200).buckets["redone"] == 0


def test_a_background_saves_state_is_the_one_taken_at_its_start() -> None:
    """A save that blocked 1 s and was durable 10 s after it began holds the work up to its start: training went
    on meanwhile and is redone after a crash; the save bucket is the blocking second at the start."""
    events = [
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 10),
        ev(rh.SAVE, 1, 200, seconds=10.0, blocking=1.0, cause="periodic"),
        ev(rh.TASK_EXIT, 1, 300, "task-0"),
        ev(rh.RUN_END, 1, 310, "batch-shell", exit_code=1, ended="failed"),
        ev(rh.RUN_START, 2, 400, "batch-shell"),
        ev(rh.FIRST_STEP, 2, 410),
    ]
    r = summary.report("1", events, now=T0 + 450)
    assert r.buckets["save"] == pytest.approx(1.0)
    assert r.buckets["redone"] == pytest.approx(300 - 191)  # before: 100, from the save being durable
    [save] = [s for s in r.timeline.segments if s.bucket == "save"]
    assert (save.start - T0, save.end - T0) == pytest.approx((190, 191))


@pytest.mark.parametrize(("terminal", "bar"), [(True, True), (False, False)])
def test_live_lines_carry_a_bar_only_on_a_terminal(terminal: bool, bar: bool) -> None:
    events = [
        ev(rh.RUN_START, 1, 0, "batch-shell", queue={"start": T0, "limit": 600}),
        ev(rh.FIRST_STEP, 1, 10, steps=1, step=101, total_steps=1000),
        ev(rh.PROGRESS, 1, 70, steps=601, step=701, step_seconds=0.1, total_steps=1000),
    ]
    view = live.live(events, T0 + 75)
    assert view is not None and view.step == 701 and view.steps_per_second == pytest.approx(10.0)
    assert view.eta_end == pytest.approx(29.9) and view.eta_limit == pytest.approx(525.0)  # 299 steps at 10/s
    text = live.lines(view, terminal, width=40)
    assert "step: 701/1000 (sampled 5 s ago)" in text and "rate: 10 steps/s" in text
    assert any(line.startswith("[") for line in text) is bar
    assert live.live(events[:1], T0 + 5) is None  # nothing sampled yet: the table says all


@pytest.mark.parametrize(
    ("own", "peers", "expected"),
    [
        ((3, 900.0), [(10, 1000.0)], (3, 900.0, "this job")),  # enough of its own: the peers are not asked
        ((1, 900.0), [], (1, 900.0, "this job")),  # too few, but no peer on the cluster and partition
        ((1, 900.0), [(0, 500.0)], (1, 900.0, "this job")),  # peers with no interruption add nothing
        ((1, 900.0), [(4, 1000.0), (0, 100.0)], (5, 2000.0, "this job and 2 other job(s) on c/p")),
        ((0, 900.0), [(2, 300.0), (1, 0.0)], (2, 1200.0, "this job and 1 other job(s) on c/p")),  # no run time
    ],
)
def test_the_interruption_rate_is_pooled_only_when_this_job_has_too_few(
    own: tuple[int, float], peers: list[tuple[int, float]], expected: tuple[int, float, str]
) -> None:
    assert advice.pooled_rate(own, peers, "c/p") == expected


def test_rebased_advice_keeps_the_jobs_save_cost_and_uses_the_pooled_rate() -> None:
    a = advice.advise(10.0, 1, 900.0, 5.0, 120.0, 3600.0, 1.0)
    b = advice.rebased(a, 5, 2000.0, "pooled")
    assert b.mtbf_seconds == 400.0 and b.basis == "pooled" and b.save_seconds == 10.0
    assert b.young_seconds == pytest.approx(math.sqrt(2 * 10.0 * 400.0))
    assert b.daly_seconds == pytest.approx(advice.daly(10.0, 400.0))
    assert b.last_save_by_seconds == a.last_save_by_seconds
    assert "5 in" in b.lines()[1] and "pooled" in b.lines()[1]


def test_the_sites_requeue_delay_is_queue_time_and_part_of_the_restart_cost() -> None:
    """Run 2 recorded a site whose requeue delay is 30 s (slurm/site_config.py): the 100 s between the runs stay
    queue time, and the advice counts 30 s of them in R; a delay longer than the wait counts only the wait."""
    plain = summary.report("1", crash_hang_preempt(), now=T0 + 5000)
    site_2 = {"windows": {}, "mode": "REQUEUE", "requeue_delay": 30}
    events = [dict(e, site=site_2) if (e["event"], e["run"]) == (rh.RUN_START, 2) else e for e in crash_hang_preempt()]
    r = summary.report("1", events, now=T0 + 5000)
    assert r.buckets["queue"] == pytest.approx(100) == plain.buckets["queue"]
    assert r.advice is not None and plain.advice is not None
    assert r.advice.requeue_delay_seconds == pytest.approx(30) and plain.advice.requeue_delay_seconds == 0
    assert r.advice.restart_seconds == pytest.approx(plain.advice.restart_seconds + 30 / (3 + 1))
    assert any("with Slurm's requeue delay, 30 s in all" in line for line in r.advice.lines())
    long = [dict(e, site=site_2 | {"requeue_delay": 500}) if (e["event"], e["run"]) == (rh.RUN_START, 2) else e
            for e in crash_hang_preempt()]  # fmt: skip
    advice_long = summary.report("1", long, now=T0 + 5000).advice
    assert advice_long is not None and advice_long.requeue_delay_seconds == pytest.approx(100)
    for odd in (True, float("nan"), float("inf"), "30", None):  # no number: JSON's true is not 1 s, NaN no delay
        forged = [dict(e, site=site_2 | {"requeue_delay": odd}) if (e["event"], e["run"]) == (rh.RUN_START, 2)
                  else e for e in crash_hang_preempt()]  # fmt: skip
        advice_odd = summary.report("1", forged, now=T0 + 5000).advice
        assert advice_odd is not None and advice_odd.requeue_delay_seconds == 0, odd


def test_a_records_number_is_a_finite_json_number_and_never_a_bool() -> None:
    assert rh.number(3) == 3.0 and isinstance(rh.number(3), float) and rh.number(-0.5) == -0.5
    odd = (True, False, float("nan"), float("inf"), -float("inf"), "3", None, [1])
    assert [rh.number(v) for v in odd] == [None] * len(odd)


def test_the_run_start_records_the_sites_requeue_delay() -> None:
    from recorded import recorded_text

    from slurmgen.slurm import site

    conf = site.parse_config(recorded_text("handwritten-show-config-25.11-expedite.out"))
    event = site.site_preemption_event(site.site_preemption(conf, None, 300))
    assert event["requeue_delay"] == 30
    again = site.site_preemption_from_event(event)
    assert again is not None and again.requeue_delay == 30


def test_an_ended_job_shows_its_last_step_with_no_rate_and_no_eta() -> None:
    """The samples come at 1, 2, 4 ... s: a 6 s program's last regular one is mid-run (step 80 of 120). The last
    sample, recorded as the program ends, is the one shown, as the last; an ended run makes no steps, so there is
    no rate and no ETA, and its last save is told against the run's end, not the clock."""
    events = [
        ev(rh.RUN_START, 1, 0, "batch-shell", queue={"start": T0, "limit": 600}),
        ev(rh.FIRST_STEP, 1, 1, steps=1, step=1, total_steps=120),
        ev(rh.PROGRESS, 1, 5, steps=80, step=80, step_seconds=0.05, total_steps=120),
        ev(rh.SAVE, 1, 6, seconds=0.1, steps=118),
        ev(rh.PROGRESS, 1, 7, steps=120, step=120, step_seconds=0.05, total_steps=120, last=True),
        ev(rh.FINISHED, 1, 7),
        ev(rh.RUN_END, 1, 8, "batch-shell", exit_code=0, ended="completed"),
    ]
    view = live.live(events, T0 + 3600)
    assert view is not None and view.step == 120 and not view.running
    assert view.steps_per_second is None and view.eta_end is None and view.eta_limit is None
    text = live.lines(view, False)
    assert "step: 120/120 (the last)" in text and "last save: 2 s before the run's end" in text, text
    assert not [line for line in text if line.startswith(("rate:", "eta", "time limit"))], text
    # a program that ended while its run goes on (the batch shell still at its end): no rate either
    going = live.live(events[:-1], T0 + 7.5)
    assert going is not None and going.running and going.step == 120 and going.steps_per_second is None


def test_while_a_hang_lasts_status_shows_no_rate_no_eta_and_goodput_does_not_rise() -> None:
    """Rank 0 samples at 1, 2, 4, 8 s after its first step (at 10) and then no more: its program makes no step.
    Once no sample came long after one was due, the time since the last one (at 25) is hang, not productive: no
    rate, no ETA, and goodput falls as the clock runs; the watchdog's verdict (hang events) is the same, and says so."""
    events = [ev(rh.RUN_START, 1, 0, "batch-shell"), ev(rh.FIRST_STEP, 1, 10, steps=1, total_steps=1000)]
    events += [ev(rh.PROGRESS, 1, 10 + t, steps=20 * t, step_seconds=0.05, total_steps=1000) for t in (1, 3, 7, 15)]
    going = live.live(events, T0 + 30)
    assert going is not None and going.steps_per_second == pytest.approx(20) and going.eta_end is not None
    assert going.hung_for is None
    views = [live.live(events, T0 + now) for now in (60, 90)]
    for view in views:
        assert view is not None and view.steps_per_second is None and view.eta_end is None, view
    assert views[0] is not None and views[1] is not None
    assert views[0].hung_for == pytest.approx(35) and views[1].goodput < views[0].goodput < going.goodput
    assert "rate: none: hung, no step for 35 s (a hang?)" in live.lines(views[0], terminal=False)
    assert not any(line.startswith("eta") for line in live.lines(views[0], terminal=False))
    called = [*events, ev(rh.HANG, 1, 70, "node-n1", rank=1, node="n1", progressed=T0 + 26)]
    verdict = live.live(called, T0 + 75)
    assert verdict is not None and verdict.called and verdict.hung_for == pytest.approx(49)
    r = summary.report("1", called, now=T0 + 75)
    assert r.buckets["hang"] == pytest.approx(44) and r.buckets["recovery"] == pytest.approx(5)  # 26-70, 70-75


def test_a_sweep_whose_points_record_no_step_has_an_unknown_progress_as_a_job_does() -> None:
    from slurmgen.goodput import html, text

    one = summary.report("2_0", unstepped(), now=T0 + 5000)
    two = summary.report("2_1", unstepped(), now=T0 + 5000)
    s = summary.SweepReport("2", [(0, one), (1, two)], {0: {"lr": 1}, 1: {"lr": 2}}, {0: "lr=1", 1: "lr=2"})
    data = s.to_json()
    assert (data["progress_known"], data["goodput"], data["goodput_with_queue"]) == (False, None, None)
    assert data["productive_seconds"] is None and [p["productive_seconds"] for p in data["points"].values()] == [
        None, None]  # fmt: skip
    assert data["wall_seconds"] == pytest.approx(one.wall_seconds + two.wall_seconds)
    assert data["buckets"] == {"queue": 200.0, "recovery": 20.0, "unknown": 1580.0}  # the points' own, summed
    lines = text.sweep_lines(s)
    assert "progress is unknown" in lines[0] and "goodput" not in lines[0].split(";")[1], lines
    assert [row[-2:] for row in text.sweep_rows(s)] == [("unknown", "unknown")] * 3
    assert not any(line.startswith("productive") for line in lines), lines
    page = html.sweep_page(s)
    assert 'id="progress-unknown"' in page and 'id="goodput"' not in page and "goodput unknown" in page
    known = summary.SweepReport("3", [(0, two_points().points[0][1]), (1, two)])
    assert known.progress_known and known.to_json()["goodput"] is not None  # one point's steps are enough


def test_the_sweep_status_line_says_unknown_for_points_without_steps_and_a_figure_for_points_with_them() -> None:
    from slurmgen.queries.goodput_view import rollup_line

    unknown = summary.SweepReport("2", [(0, summary.report("2_0", unstepped(), now=T0 + 5000))])
    (line,) = rollup_line(unknown.to_json())
    assert line.startswith("goodput so far: unknown") and "progress.pattern" in line and "1 point(s)" in line, line
    known = two_points()
    (line,) = rollup_line(known.to_json())
    assert line == f"goodput so far: {known.goodput:.1%} over 2 point(s) with a run history", line
    assert rollup_line(summary.SweepReport("4", []).to_json()) == ()


def test_a_runs_steps_are_those_of_its_last_start_and_none_when_that_start_made_no_step() -> None:
    """A bug at step 20 on every start: the restarted start resumes at 20 and raises before its first step. The
    run's steps are its last start's (none), not the 20 of the start before it; a last start that stepped has its
    own count."""
    events = [
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 5, steps=1),
        ev(rh.PROGRESS, 1, 7, steps=20, step=20, last=True, step_seconds=0.1),
        ev(rh.RESTART, 1, 10, "batch-shell", cause="crash", who="rank 0"),
        ev(rh.RUN_END, 1, 16, "batch-shell", exit_code=1, ended="failed"),
    ]
    [run] = summary.report("1", events, now=T0 + 100).timeline.runs
    assert run.steps is None and run.restarts == 1
    stepped = [*events[:-1], ev(rh.FIRST_STEP, 1, 12, steps=1), ev(rh.PROGRESS, 1, 14, steps=6, last=True), events[-1]]
    [run] = summary.report("1", stepped, now=T0 + 100).timeline.runs
    assert run.steps == 6


RAISE_KEPT_IN_EXIT = [
    ev(rh.TASK_EXIT, 1, 100, "task-0", rank=0, exit_code=76),
    ev(rh.TASK_EXIT, 1, 100.5, "task-1", rank=1, exit_code=1, raised="ValueError: bad", raised_at=T0 + 96),
]
# Under torchrun the task is the node's agent: the step's end took it before its raising worker exited, so the
# raise is only in the `raised` record the worker's supervisor wrote while it lingered.
RAISE_ON_ITS_OWN = [
    ev(rh.RAISED, 1, 96.2, "task-1", rank=1, raised="ValueError: bad", raised_at=T0 + 96),
    ev(rh.TASK_EXIT, 1, 100, "task-0", rank=0, exit_code=76),
]


@pytest.mark.parametrize("failure", [RAISE_KEPT_IN_EXIT, RAISE_ON_ITS_OWN], ids=["in-its-exit", "exit-never-came"])
def test_work_stops_at_the_raise_and_the_failing_ranks_linger_before_its_exit_is_recovery(
    failure: list[dict[str, Any]],
) -> None:
    """A rank raises at 96 and exits at 100.5, or never (its atexit hooks; its peer waits in a collective and exits
    at 100): the redone stretch runs from the last save (90) to the raise, and the raise to the restart is
    recovery, whether the raise is in the exit's record or in a record of its own."""
    events = [
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 10, steps=1),
        ev(rh.SAVE, 1, 90, seconds=0.0, cause="periodic", steps=80),
        *failure,
        ev(rh.RESTART, 1, 110, "batch-shell", cause="crash", who="rank 1"),
        ev(rh.FIRST_STEP, 1, 120, steps=1),
        ev(rh.FINISHED, 1, 200),
        ev(rh.RUN_END, 1, 200, "batch-shell", exit_code=0, ended="completed"),
    ]
    r = summary.report("1", events, now=T0 + 300)
    assert r.buckets["redone"] == pytest.approx(96 - 90)
    assert r.buckets["recovery"] == pytest.approx(110 - 96)
    assert r.productive_seconds + sum(r.buckets.values()) == pytest.approx(r.wall_seconds)


def test_a_runs_step_time_is_its_sampled_mean_not_the_one_step_its_last_sample_spans_when_a_peer_died() -> None:
    """Rank 1 is killed at 31.7 s; rank 0's step 28 waits on it in a collective and its last sample (the stop's)
    says 0.32 s for that one step. The run's step time is the mean the samples before it said, 0.12 s, not the
    stalled step, and not the stop's longest recent interval."""
    events = [
        ev(rh.RUN_START, 1, 0, "batch-shell"),
        ev(rh.FIRST_STEP, 1, 28.3, step=1, steps=1),
        ev(rh.PROGRESS, 1, 29.4, step=10, steps=10, step_seconds=0.1225),
        ev(rh.PROGRESS, 1, 31.5, step=27, steps=27, step_seconds=0.1208),
        ev(rh.TASK_EXIT, 1, 31.7, "task-1", rank=1, exit_code=137, signal="KILL"),
        ev(rh.STOP, 1, 31.8, cause="preemption", step_seconds=0.4),
        ev(rh.PROGRESS, 1, 31.82, step=28, steps=28, step_seconds=0.321, last=True),
        ev(rh.RUN_END, 1, 40, "batch-shell", exit_code=137, ended="requeued", requeued=True),
    ]
    [run] = summary.report("1", events, now=T0 + 50).to_json()["runs"]
    assert run["step_seconds"] == pytest.approx(0.1208)
    ended = [*events[:2], ev(rh.PROGRESS, 1, 30.0, step=20, steps=20, step_seconds=0.09, last=True), events[-1]]
    [run] = summary.report("1", ended, now=T0 + 50).to_json()["runs"]
    assert run["step_seconds"] == pytest.approx(0.09)  # the only sample that says one
