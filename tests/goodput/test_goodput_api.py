"""`slurmgen.Job.report()` and `slurmgen.Sweep.report()` on histories written where the journal says a job logs:
the same data as the pure report of those events (the JSON of `slurmgen report --json`), found through the job
interface with no Slurm query (the client is absent)."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import slurmgen
from goodput.test_goodput import T0, crash_hang_preempt, ev
from slurmgen import run_history as rh
from slurmgen.backends.slurm_here.sweep import SlurmSweep
from slurmgen.goodput import summary
from slurmgen.journal import Entry, Journal
from slurmgen.queries import fanout, goodput_files
from slurmgen.spec.sweep_points import SweepSpec
from slurmgen.submission.sweep_record import SweepRecord
from slurmgen.submission.sweep_submit import OFFSET_KEY, SWEEP_KEY, TASKS_KEY


def write(log_dir: Path, events: list[dict[str, Any]]) -> None:
    for e in events:
        fields = {k: v for k, v in e.items() if k not in ("v", "event", "run", "time", "by")}
        rh.append(str(log_dir), e["by"], e["event"], e["run"], e["time"], **fields)


def entry(tmp_path: Path, job_id: str, **extra: Any) -> Entry:
    return Entry("submitted", f"t{job_id}", "job", str(tmp_path / "job.yaml"), str(tmp_path / "run"),
                 str(tmp_path / "run" / "job.sbatch"), T0, job_id=job_id, log_dir=str(tmp_path / "logs"),
                 array=bool(extra), extra=extra)  # fmt: skip


def test_job_report_is_the_report_of_its_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMGEN_HOME", str(tmp_path / ".slurmgen"))
    Journal(tmp_path / ".slurmgen").append(entry(tmp_path, "123"))
    write(tmp_path / "logs" / "job-123", crash_hang_preempt())
    got = slurmgen.Job("123").report()
    expected = summary.report("123", rh.read(str(tmp_path / "logs" / "job-123")), now=T0 + 5000).to_json()
    assert got == expected  # the job ended: nothing depends on the clock
    assert got["goodput"] == pytest.approx(got["productive_seconds"] / got["wall_seconds"], abs=1e-6)
    assert got["redone_steps"] == 42 and got["advice"] is not None


def test_sweep_report_rolls_up_its_points(tmp_path: Path) -> None:
    array = entry(tmp_path, "200", **{SWEEP_KEY: "s1", OFFSET_KEY: 0, TASKS_KEY: "0-1"})
    record = SweepRecord("s1", (array,), SweepSpec(("lr",), ((0.1,), (0.2,)), None), {})
    point0 = crash_hang_preempt()
    point1 = [e for e in point0 if e["run"] == 1]  # one run only: lost, no run 2
    write(tmp_path / "logs" / "job-200_0", point0)
    write(tmp_path / "logs" / "job-200_1", point1)
    got = slurmgen.Sweep.for_record(record).report()
    assert got["sweep"] == "s1" and sorted(got["points"]) == ["0", "1"]
    alone = [summary.report(f"200_{p}", events, now=T0 + 5000) for p, events in enumerate((point0, point1))]
    assert got["wall_seconds"] == pytest.approx(sum(r.wall_seconds for r in alone), abs=0.01)
    assert got["productive_seconds"] == pytest.approx(sum(r.productive_seconds for r in alone), abs=0.01)
    for name in got["buckets"]:
        assert got["buckets"][name] == pytest.approx(sum(r.buckets[name] for r in alone), abs=0.01), name
    assert got["points"]["0"]["goodput"] == round(alone[0].goodput, 6)
    assert got["points"]["0"]["advice"] is None  # the roll-up leaves the points' advice to doctor SWEEP
    assert [(p["values"], p["outcome"]) for p in got["points"].values()] == [({"lr": 0.1}, "completed"),
                                                                            ({"lr": 0.2}, "requeued")]  # fmt: skip
    # history SWEEP reads the same points' histories, each beside its values
    points = SlurmSweep(record).history_points()
    assert points is not None
    assert [(i, shown, [d.name for d in dirs]) for i, shown, dirs in points] == [
        (0, "lr=0.1", ["job-200_0"]), (1, "lr=0.2", ["job-200_1"])]  # fmt: skip


def test_a_sweep_report_spread_over_forked_children_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large sweep's points are read and reported in forked children (queries/fanout.py): the same roll-up."""
    array = entry(tmp_path, "200", **{SWEEP_KEY: "s1", OFFSET_KEY: 0, TASKS_KEY: "0-5"})
    record = SweepRecord("s1", (array,), SweepSpec(("lr",), tuple((k / 10,) for k in range(6)), None), {})
    for p in range(6):
        write(tmp_path / "logs" / f"job-200_{p}", [e for e in crash_hang_preempt() if e["run"] <= 1 + p % 2])
    alone = slurmgen.Sweep.for_record(record).report()
    monkeypatch.setattr(fanout, "FANOUT_FROM", 2)
    monkeypatch.setattr(fanout, "processes", lambda: 3)
    pids = tmp_path / "pids"

    def report(*args: Any, **kwargs: Any) -> summary.Report:  # notes which process made each point's report
        with pids.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return summary.report(*args, **kwargs)

    monkeypatch.setattr(goodput_files, "report", report)
    spread = slurmgen.Sweep.for_record(record).report()
    assert spread == alone and sorted(spread["points"]) == [str(p) for p in range(6)]
    made_by = pids.read_text().split()
    assert len(made_by) == 6 and len(set(made_by)) == 3 and str(os.getpid()) in made_by  # here and two children


def one_run(partition: str, restarts: int, seconds: float) -> list[dict[str, Any]]:
    """One run in `partition` of `seconds`, two 10 s saves (one is too thin a basis for advice) and `restarts`
    crash restarts, ended (completed)."""
    events = [ev(rh.RUN_START, 1, 0, "batch-shell", partition=partition), ev(rh.FIRST_STEP, 1, 5, steps=1),
              ev(rh.SAVE, 1, 30, seconds=10.0, cause="periodic", steps=20),
              ev(rh.SAVE, 1, 50, seconds=10.0, cause="periodic", steps=40)]  # fmt: skip
    events += [ev(rh.RESTART, 1, 60 + k, "batch-shell", cause="crash", steps_lost=1) for k in range(restarts)]
    return [*events, ev(rh.RUN_END, 1, seconds, "batch-shell", exit_code=0, ended="completed")]


def test_job_advice_pools_the_journals_jobs_on_its_cluster_and_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURMGEN_HOME", str(tmp_path / ".slurmgen"))
    journal = Journal(tmp_path / ".slurmgen")
    jobs = {"300": ("gpu", 1, 1000.0), "301": ("gpu", 4, 3000.0), "302": ("cpu", 9, 500.0), "303": ("gpu", 7, 500.0)}
    for job, (partition, restarts, seconds) in jobs.items():
        cluster = "other" if job == "303" else None  # same partition name, another cluster: not pooled
        journal.append(replace(entry(tmp_path, job), cluster=cluster))
        write(tmp_path / "logs" / f"job-{job}", one_run(partition, restarts, seconds))
    got = slurmgen.Job("300").report()["advice"]
    assert (got["interruptions"], got["observed_seconds"]) == (5, 4000.0), got
    assert got["mtbf_seconds"] == 800.0 and got["basis"] == "this job and 1 other job(s) on this cluster/gpu"
    assert got["young_seconds"] == pytest.approx(math.sqrt(2 * 10.0 * 800.0))
    # a job with enough interruptions of its own keeps its own rate
    own = slurmgen.Job("301").report()["advice"]
    assert (own["interruptions"], own["basis"]) == (4, "this job")
