"""`slurmgen history` and the save-window checks, from run histories written by hand (run_history.append)."""

from __future__ import annotations

from pathlib import Path

from history_events import GIB, SITE, T0, write_three_runs

from slurmgen import run_history
from slurmgen.journal import Entry
from slurmgen.queries import history
from slurmgen.queries.status import when
from slurmgen.slurm import site
from slurmgen.slurm.ids import JobId
from slurmgen.submission.targets import Target

PLAN = site.site_preemption_from_event(SITE)  # windows: preemption 35 s (grace 30 + KillWait 5), time-limit 60 s


def entry(job_id: str, log_dir: Path, array: bool = False) -> Entry:
    return Entry("submitted", "T", "train", "/w/train.yaml", "/w/runs/T", "/w/runs/T/job.sbatch", T0, job_id,
                 log_dir=str(log_dir), array=array)  # fmt: skip


def test_one_row_per_run(tmp_path: Path) -> None:
    write_three_runs(tmp_path / "train-15")
    cells = history.rows(run_history.read(str(tmp_path / "train-15")), now=T0 + 2000)
    by_column = [dict(zip(history.COLUMNS, row, strict=True)) for row in cells]
    assert [r["RUN"] for r in by_column] == ["1", "2", "3"]
    first, second, third = by_column
    assert (first["NODES"], first["EXIT"], first["CAUSE"], first["REQUEUED BY"]) == (
        "node[1-2]", "143", "preemption (REQUEUE)", "Slurm",
    )  # fmt: skip
    assert (first["SAVE"], first["SIZE"], first["NOTE"]) == ("12.5 s", "1.5 GiB", "")
    assert (second["CAUSE"], second["REQUEUED BY"], second["SAVE"], second["SIZE"]) == (
        "time-limit", "rank 0", "50.0 s", "2.0 GiB",
    )  # fmt: skip
    # a time-limit save is held to the time-limit window (60 s), not the tighter preemption one (35 s)
    assert second["NOTE"] == ""
    assert (third["EXIT"], third["CAUSE"], third["REQUEUED BY"], third["SAVE"]) == ("0", "", "", "")
    assert first["START"] == when(T0, T0 + 2000) and first["END"] == when(T0 + 131, T0 + 2000)


def test_a_save_that_missed_its_window_is_marked(tmp_path: Path) -> None:
    write_three_runs(tmp_path, last_save=58.0)  # 58 s + a 4 s step > the 60 s lead
    second = dict(zip(history.COLUMNS, history.rows(run_history.read(str(tmp_path)))[1], strict=True))
    assert second["NOTE"] == "! save+step 62.0 s > 60 s time-limit window (the --signal lead time)"


def test_the_table_leaves_out_empty_columns(tmp_path: Path) -> None:
    run_history.append(str(tmp_path), "batch-shell", run_history.RUN_START, 1, T0, nodes="n1")
    lines = history.table(history.rows(run_history.read(str(tmp_path)), now=T0)).splitlines()
    assert lines[0].split() == ["RUN", "START", "NODES"]
    assert lines[1].split() == ["1", when(T0, T0), "n1"]


def test_window_miss_holds_a_save_to_its_causes_window() -> None:
    assert history.window_miss(PLAN, 30.0, 4.0, "preemption") is None  # 34 s <= 35 s
    miss = history.window_miss(PLAN, 32.0, 4.0, "preemption")
    assert miss == history.WindowMiss("preemption", 36.0, 35.0, "GraceTime 30 s + KillWait 5 s")
    assert history.window_miss(PLAN, 50.0, 4.0, "time-limit") is None
    # a periodic save is held to the tightest window the next stop may have
    assert history.window_miss(PLAN, 50.0, 4.0, "periodic") == history.WindowMiss(
        "preemption", 54.0, 35.0, "GraceTime 30 s + KillWait 5 s"
    )
    assert history.window_miss(None, 500.0, 4.0, None) is None  # no site recorded: nothing to hold it to
    assert history.window_miss(PLAN, None, 4.0, None) is None


def test_last_save_and_the_status_warning(tmp_path: Path) -> None:
    log_dir = tmp_path / "train-15"
    write_three_runs(log_dir, last_save=70.0)
    found = history.read_last_save(log_dir, "15")
    assert found is not None and (found.run, found.seconds, found.size, found.step_seconds) == (2, 70.0, 2 * GIB, 4.0)
    assert found.miss == history.WindowMiss("time-limit", 74.0, 60.0, "the --signal lead time")
    (line,) = history.window_warnings([Target(JobId(15), entry("15", tmp_path))])
    assert line == (
        "warning: job 15: its last save took 70.0 s plus a step of 4.0 s (run 2), more than the 60 s time-limit "
        "window (the --signal lead time): it would be killed mid-save; see slurmgen doctor"
    )
    assert history.window_warnings([Target(JobId(15), None)]) == []  # not in the journal: not looked for


def test_no_warning_when_it_fits_or_no_site_was_recorded(tmp_path: Path) -> None:
    write_three_runs(tmp_path / "train-15", last_save=50.0)
    write_three_runs(tmp_path / "train-16", site=None, last_save=500.0)
    targets = [Target(JobId(n), entry(str(n), tmp_path)) for n in (15, 16)]
    assert history.window_warnings(targets) == []


def test_the_latest_runs_site_applies(tmp_path: Path) -> None:
    write_three_runs(tmp_path, last_save=50.0)
    slower = {**SITE, "windows": {"preemption": 35.0, "time-limit": 45.0}}  # the lead was lowered since
    run_history.append(str(tmp_path), "batch-shell", run_history.RUN_START, 4, T0 + 2000, site=slower)
    found = history.read_last_save(tmp_path, "15")
    assert found is not None and found.miss is not None and (found.run, found.miss.window) == (2, 45.0)


def test_log_dirs_of_a_job_and_of_an_array(tmp_path: Path) -> None:
    assert history.job_log_dirs(Target(JobId(15), entry("15", tmp_path)), []) == [tmp_path / "train-15"]
    for name in ("train-12_1.log", "train-12_2.log"):
        (tmp_path / name).write_text("")
    whole = Target(JobId(12), entry("12", tmp_path, array=True))
    assert history.job_log_dirs(whole, []) == [tmp_path / "train-12_1", tmp_path / "train-12_2"]


def test_no_history_messages(tmp_path: Path) -> None:
    target = Target(JobId(15), entry("15", tmp_path))
    assert history.no_history(target, [tmp_path / "train-15"], False) == (
        f"job 15: no run history (looked in {tmp_path}/train-15/history/); a job records its runs once its first "
        "run has started, if it was submitted by slurmgen"
    )
    assert "neither the journal here nor Slurm knows it" in history.no_history(Target(JobId(9), None), [], False)


def test_sizes() -> None:
    assert [history.size_text(n) for n in (None, 0, 1023, 1024, 5 * GIB, 3 << 40, 5 << 50)] == [
        "", "0 B", "1023 B", "1.0 KiB", "5.0 GiB", "3.0 TiB", "5120.0 TiB",
    ]  # fmt: skip


def test_each_restart_inside_the_allocation_is_shown_with_its_cause_rank_node_and_time_lost(tmp_path: Path) -> None:
    log = str(tmp_path / "train-15")
    run_history.append(log, "batch-shell", run_history.RUN_START, 1, T0, nodes="n[1-2]")
    run_history.append(log, "batch-shell", run_history.RESTART, 1, T0 + 60, cause="crash", lost_seconds=12.5,
                       who="rank 1 on n2 (killed by SIGKILL)", rank=1, node="n2")  # fmt: skip
    run_history.append(log, "batch-shell", run_history.RESTART, 1, T0 + 90, cause="crash",
                       who="rank 0 on n1 (exit 1)")  # fmt: skip
    run_history.append(log, "batch-shell", run_history.REPEATED, 1, T0 + 120, error="ValueError: x")
    run_history.append(log, "batch-shell", run_history.RUN_END, 1, T0 + 121, exit_code=1, ended="failed")
    [row] = history.rows(run_history.read(log), now=T0 + 200)
    note = dict(zip(history.COLUMNS, row, strict=True))["NOTE"]
    assert "restart 1 (crash: rank 1 on n2 (killed by SIGKILL), 12.5 s lost)" in note
    assert "restart 2 (crash: rank 0 on n1 (exit 1))" in note
    assert "the same failure repeated (ValueError: x): not restarted" in note
    lines = history.restart_lines([Target(JobId(15), entry("15", tmp_path))])
    assert lines == [
        "job 15: run 1, restart 1 inside the allocation (crash: rank 1 on n2 (killed by SIGKILL), 12.5 s lost)",
        "job 15: run 1, restart 2 inside the allocation (crash: rank 0 on n1 (exit 1))",
        "job 15: run 1: the same failure repeated (ValueError: x): not restarted",
    ]


def test_a_restart_shows_the_steps_it_lost_when_they_are_known() -> None:
    event = {"cause": "crash", "who": "rank 1 on n2 (killed by SIGKILL)", "steps_lost": 17, "lost_seconds": 12.5}
    assert run_history.restart_text(event) == "crash: rank 1 on n2 (killed by SIGKILL), 17 steps lost, 12.5 s lost"
    assert run_history.restart_text({**event, "steps_lost": 1}).endswith(", 1 step lost, 12.5 s lost")
    unknown = {**event, "steps_lost": None}  # a program that never calls should_stop(): no progress marks
    assert run_history.restart_text(unknown) == "crash: rank 1 on n2 (killed by SIGKILL), 12.5 s lost"
    assert run_history.restart_text({"cause": "hang", "who": "no progress"}) == "hang: no progress"


def test_a_torn_line_and_a_foreign_record_are_skipped_the_rest_is_read(tmp_path: Path) -> None:
    # read parses a whole file at once and falls back to line by line: a crash mid-write tears the last line
    run_history.append(str(tmp_path), "rank0", run_history.SAVE, 1, T0, seconds=1.0)
    run_history.append(str(tmp_path), "rank0", run_history.SAVE, 1, T0 + 5, seconds=2.0)
    path = Path(run_history.history_dir(str(tmp_path))) / "rank0.jsonl"
    with path.open("a", encoding="utf-8") as f:
        f.write('[1, 2]\n{"event": "save", "run": "x"}\n{"v":1,"event":"save","run":1,"ti')
    assert [e["seconds"] for e in run_history.read(str(tmp_path))] == [1.0, 2.0]
    path.write_text("", encoding="utf-8")
    assert run_history.read(str(tmp_path)) == []
    # A line that is not UTF-8 (a disk error, a foreign writer) is skipped; the lines around it are read.
    run_history.append(str(tmp_path), "rank0", run_history.SAVE, 1, T0, seconds=3.0)
    with path.open("ab") as f:
        f.write(b'{"v":1,"event":"save","run":1,"time":1,"note":"\xff\xfe"}\n')
    run_history.append(str(tmp_path), "rank0", run_history.SAVE, 1, T0 + 1, seconds=4.0)
    assert [e["seconds"] for e in run_history.read(str(tmp_path))] == [3.0, 4.0]


def test_a_sweeps_history_lists_every_points_runs_with_the_points_values(tmp_path: Path) -> None:
    write_three_runs(tmp_path / "train-15_0")
    events = run_history.read(str(tmp_path / "train-15_0"))
    one_run = [e for e in events if e["run"] == 1]
    lines = history.sweep_table([(0, "lr=0.1", events), (1, "lr=0.2", one_run)], now=T0 + 2000).splitlines()
    assert lines[0].split()[:3] == ["POINT", "VALUES", "RUN"]
    assert [line.split()[:3] for line in lines[1:]] == [["0", "lr=0.1", str(run)] for run in (1, 2, 3)] + [
        ["1", "lr=0.2", "1"]
    ]
    # the same cells as each point's own table, after the point's two
    assert lines[1].split()[2:] == history.table(history.rows(events, now=T0 + 2000)).splitlines()[1].split()
