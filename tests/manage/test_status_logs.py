"""The status table from recorded scontrol records and journal entries; finding, printing and following logs."""

from __future__ import annotations

import itertools
from pathlib import Path

from recorded import recorded_text

from slurmgen.journal import Entry
from slurmgen.queries import logs, status
from slurmgen.slurm.ids import JobId
from slurmgen.slurm.showjob import job_info, parse_show_job
from slurmgen.submission.targets import Target


def records(name: str) -> list[dict[str, str]]:
    return parse_show_job(recorded_text(f"{name}.out"))


def entry(job_id: str | None, log_dir: str = "/w/logs", array: bool = False, event: str = "submitted") -> Entry:
    return Entry(event, "T", "train", "/w/train.yaml", "/w/runs/T", "/w/runs/T/job.sbatch", 0.0, job_id,
                 log_dir=log_dir, array=array)  # fmt: skip


def test_state_labels_map_with_an_unknown_default() -> None:
    by_state = {
        job_info(r).state_name: status.state_label(job_info(r)) for r in records("handwritten-show-job-o-states")
    }
    assert by_state["NODE_FAIL"] == "FAILED (NODE_FAIL)"
    assert by_state["PREEMPTED"] == "PREEMPTED"
    assert all(label.startswith("UNKNOWN (") for name, label in by_state.items() if "UNKNOWN" in label)
    assert any(label.startswith("UNKNOWN (") for label in by_state.values())  # the state no Slurm has
    held = job_info(records("show-job-o-requeue-hold")[0])
    assert status.state_label(held) == "HELD"


def test_table() -> None:
    rows = [status.row_from_info(job_info(r), None, 0.0) for r in records("show-job-o-array")]
    rows.append(status.row_from_entry(entry("9"), 0.0))
    rows.append(status.row_from_entry(entry(None, event="unknown"), 0.0))
    lines = status.table(rows).splitlines()
    assert lines[0].split() == ["JOB", "NAME", "STATE", "REASON", "REQUEUES", "NODES", "ELAPSED/LIMIT", "SUBMITTED"]
    assert lines[1].split()[:4] == ["11_[3-5%2]", "arr", "PENDING", "JobArrayTaskLimit"]
    assert lines[2].split()[:3] == ["11_2", "arr", "RUNNING"]
    assert lines[4].split()[:3] == ["9", "train", "gone"]
    assert lines[5].split()[:3] == ["?", "train", "UNKNOWN"] and "sbatch timed out" in lines[5]
    assert lines[1].index("00:00:00/UNLIMITED") == lines[0].index("ELAPSED/LIMIT")  # aligned columns
    exit_row = status.row_from_info(job_info(records("show-job-o-cancelled")[0]), None, 0.0)
    assert (exit_row.exit, exit_row.nodes) == ("signal 15", "node1")
    assert exit_row.elapsed.endswith("/365-00:00:00") and exit_row.elapsed.startswith("00:00:0")  # a moment


def test_batch_logs_from_the_journal_and_from_slurm(tmp_path: Path) -> None:
    plain = Target(JobId(12), entry("12", str(tmp_path)))
    assert logs.batch_logs(plain, []) == [tmp_path / "train-12.log"]
    task = Target(JobId(12, array_task=3), entry("12", str(tmp_path), array=True))
    assert logs.batch_logs(task, []) == [tmp_path / "train-12_3.log"]
    for name in ("train-12_1.log", "train-12_2.log", "train-120.log"):
        (tmp_path / name).write_text("")
    whole = Target(JobId(12), entry("12", str(tmp_path), array=True))
    assert logs.batch_logs(whole, []) == [tmp_path / "train-12_1.log", tmp_path / "train-12_2.log"]
    foreign = Target(JobId(15), None)  # not in the journal: Slurm's StdOut=
    assert logs.batch_logs(foreign, [job_info(r) for r in records("show-job-o-failed")]) == [
        Path("/tmp/slurmgen-record/15.out")
    ]


def test_follower_prints_only_what_is_new_with_a_header_per_switch(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b" / "node1.log"
    b.parent.mkdir()
    a.write_text("run 1\n")
    out: list[bytes] = []
    follower = logs.Follower(out.append, tmp_path)
    assert follower.poll([a, b]) is True
    b.write_text("rank 0\n")
    with a.open("a") as f:
        f.write("run 2\n")
    assert follower.poll([a, b]) is True
    assert follower.poll([a, b]) is False
    assert b"".join(out).decode() == "==> a.log <==\nrun 1\nrun 2\n\n==> b/node1.log <==\nrank 0\n"


def test_follow_stops_once_the_job_ended_and_the_files_are_quiet(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("")
    out: list[bytes] = []
    now = [0.0]
    asked: list[float] = []

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] == 3 * logs.POLL:
            with log.open("a") as f:
                f.write("late line\n")

    def finished() -> bool:
        asked.append(now[0])
        return now[0] >= 25.0  # the job ends 25 s into the follow

    logs.follow(lambda: [log], finished, logs.Follower(out.append, tmp_path), sleep=sleep, clock=lambda: now[0])
    assert b"".join(out) == b"==> x.log <==\nlate line\n"
    # slurmctld was asked at most every STATE_POLL seconds, and the follower stopped soon after the end
    assert all(b - a >= logs.STATE_POLL for a, b in itertools.pairwise(asked)), asked
    assert len(asked) <= 4 and 25.0 <= now[0] <= 25.0 + logs.STATE_POLL + logs.SETTLE * logs.POLL + logs.POLL


def test_select_and_missing(tmp_path: Path) -> None:
    batch = tmp_path / "train-12.log"
    (tmp_path / "train-12").mkdir()
    (tmp_path / "train-12" / "node2.log").write_text("")
    (tmp_path / "train-12" / "node1.log").write_text("")
    assert logs.select([batch], None) == [tmp_path / "train-12" / "node1.log", tmp_path / "train-12" / "node2.log"]
    batch.write_text("")
    assert logs.select([batch], None)[0] == batch
    assert logs.select([batch], "node2") == [tmp_path / "train-12" / "node2.log"]
    target = Target(JobId(12), None)
    assert "nodes with logs: node1, node2" in logs.missing_message(target, [batch], "node7", [])


def test_rank_logs_apart_from_the_node_logs(tmp_path: Path) -> None:
    """`rank-<N>.log` (what rank N's program printed) sit next to the node logs; --rank picks one, by number."""
    batch = tmp_path / "train-12.log"
    batch.write_text("")
    job = tmp_path / "train-12"
    job.mkdir()
    for name in ("node1.log", "rank-10.log", "rank-2.log", "rank-0.log"):
        (job / name).write_text("")
    assert logs.node_logs(batch) == [job / "node1.log"]
    assert logs.rank_logs(batch) == [job / "rank-0.log", job / "rank-2.log", job / "rank-10.log"]
    assert logs.select([batch], None) == [batch, job / "node1.log", job / "rank-0.log", job / "rank-2.log",
                                          job / "rank-10.log"]  # fmt: skip
    assert logs.select([batch], None, 2) == [job / "rank-2.log"]
    assert logs.select([batch], "node1") == [job / "node1.log"]
    message = logs.missing_message(Target(JobId(12), None), [batch], None, [], 5)
    assert message == "job 12: no log of rank 5 (ranks with logs: 0, 2, 10)"
