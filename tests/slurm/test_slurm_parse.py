"""Parsing every recorded (and hand-written) scheduler output in tests/data/slurm/ to its exact outcome."""

from __future__ import annotations

from datetime import datetime

import pytest
from recorded import recorded_text as data

from slurmgen.errors import SchedulerError, UsageError
from slurmgen.slurm.ids import JobId, JobState, parse_job_id, parse_state
from slurmgen.slurm.parse import (
    Submitted,
    parse_comments,
    parse_duration,
    parse_sbatch_output,
    parse_squeue,
    parse_test_only,
)
from slurmgen.slurm.showjob import job_info, parse_show_job

YEAR = 365 * 24 * 3600  # Slurm shows a partition's INFINITE limit to a running job as 365-00:00:00


# --- job ids ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected", "requeue"),
    [
        ("123", JobId(123), "123"),
        (" 123\n", JobId(123), "123"),
        ("123_4", JobId(123, array_task=4), "123_4"),
        ("123_4.batch", JobId(123, array_task=4, step="batch"), "123_4"),
        ("123+1", JobId(123, het_offset=1), "123"),
        ("123+0.0", JobId(123, het_offset=0, step="0"), "123"),
        ("123.extern", JobId(123, step="extern"), "123"),
        ("123.17", JobId(123, step="17"), "123"),
        ("20_[0%1]", JobId(20, array_tasks="0%1"), None),
        ("20_[2-7%56]", JobId(20, array_tasks="2-7%56"), None),
        ("20_[2-7,12-17,22%56]", JobId(20, array_tasks="2-7,12-17,22%56"), None),
        ("57829110_[5-100]", JobId(57829110, array_tasks="5-100"), None),
        ("4294967295", JobId(4294967295), "4294967295"),
    ],
)
def test_parse_job_id(text: str, expected: JobId, requeue: str | None) -> None:
    job = parse_job_id(text)
    assert job == expected
    assert str(job) == text.strip()  # Slurm's own spelling comes back
    if requeue is None:
        with pytest.raises(UsageError, match="range of pending array tasks"):
            job.requeue_target()
    else:
        assert job.requeue_target() == requeue


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "-1",
        "0",
        "12a",
        "123_",
        "123_[]",
        "123_[1-",
        "123;rm -rf /",
        "123 456",
        "123\n456",
        "123_4+1",
        "123.foo",
        "1.2.3",
        "99999999999",
        "4294967296",
        "123_[1-3]x",
        "$(id)",
    ],
)
def test_parse_job_id_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_job_id(text)


def test_job_id_from_int_and_invalid_combinations() -> None:
    assert parse_job_id(42) == JobId(42)
    with pytest.raises(UsageError):
        JobId(1, array_task=2, het_offset=0)
    with pytest.raises(UsageError):
        JobId(1, array_tasks="1-3; id")
    assert JobId(5, array_task=2, step="batch").without_step() == JobId(5, array_task=2)


# --- states ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("PENDING", JobState.PENDING),
        ("CONFIGURING", JobState.PENDING),
        ("REQUEUED", JobState.PENDING),
        ("REQUEUE_FED", JobState.PENDING),
        ("RESIZING", JobState.PENDING),
        ("REQUEUE_HOLD", JobState.HELD),
        ("SPECIAL_EXIT", JobState.HELD),
        ("RESV_DEL_HOLD", JobState.HELD),
        ("RUNNING", JobState.RUNNING),
        ("SIGNALING", JobState.RUNNING),
        ("STAGE_OUT", JobState.RUNNING),
        ("SUSPENDED", JobState.SUSPENDED),
        ("STOPPED", JobState.SUSPENDED),
        ("COMPLETING", JobState.COMPLETING),
        ("PREEMPTED", JobState.PREEMPTED),
        ("COMPLETED", JobState.COMPLETED),
        ("FAILED", JobState.FAILED),
        ("NODE_FAIL", JobState.FAILED),
        ("BOOT_FAIL", JobState.FAILED),
        ("OUT_OF_MEMORY", JobState.FAILED),
        ("DEADLINE", JobState.FAILED),
        ("CANCELLED", JobState.CANCELLED),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("REVOKED", JobState.CANCELLED),
        ("TIMEOUT", JobState.TIMEOUT),
        ("PD", JobState.PENDING),
        ("CG", JobState.COMPLETING),
        ("OOM", JobState.FAILED),
        ("running", JobState.RUNNING),
        ("FROBNICATED", JobState.UNKNOWN),
        ("", JobState.UNKNOWN),
    ],
)
def test_state_table(text: str, state: JobState) -> None:
    assert parse_state(text) is state


def test_terminal_and_active() -> None:
    terminal = {s for s in JobState if s.is_terminal}
    active = {s for s in JobState if s.is_active}
    assert terminal == {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT}
    # COMPLETING and PREEMPTED are on the way to a requeue as often as to the end (submitit #1788).
    assert JobState.COMPLETING in active
    assert not JobState.PREEMPTED.is_terminal and not JobState.PREEMPTED.is_active
    assert not JobState.UNKNOWN.is_terminal and not JobState.UNKNOWN.is_active


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:00:01", 1),
        ("0:03", 3),
        ("1:00", 60),
        ("00:01:00", 60),
        ("1:00:00", 3600),
        ("365-00:00:00", YEAR),
        ("1-02:03:04", 93784),
        ("UNLIMITED", None),
        ("INFINITE", None),
        ("N/A", None),
        ("", None),
        ("5", None),
        ("soon", None),
    ],
)
def test_parse_duration(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds


# --- sbatch ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sbatch-parsable.out", Submitted(JobId(3), None)),
        ("sbatch-plain.out", Submitted(JobId(4), None)),
        ("handwritten-sbatch-parsable-cluster.out", Submitted(JobId(42), "alpha")),
        ("handwritten-sbatch-on-cluster.out", Submitted(JobId(42), "alpha")),
        ("handwritten-sbatch-banner.out", Submitted(JobId(4567), None)),
        ("handwritten-sbatch-parsable-banner.out", Submitted(JobId(4567), None)),
    ],
)
def test_sbatch_output(name: str, expected: Submitted) -> None:
    assert parse_sbatch_output(data(name)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "printed no job id"),
        ("  \n\n", "printed no job id"),
        (data("handwritten-sbatch-garbage.out"), "request accepted"),
        (data("handwritten-sbatch-two-ids.out"), "several jobs \\(4567, 4568\\)"),
        ("Submitted batch job 12x\n", "printed no job id"),
    ],
)
def test_sbatch_output_without_one_id(text: str, message: str) -> None:
    with pytest.raises(SchedulerError, match=message):
        parse_sbatch_output(text)


def test_sbatch_test_only() -> None:
    result = parse_test_only(data("sbatch-test-only.err"))
    assert result.start == datetime(4748, 12, 6, 17, 28, 14)  # what 22.05 really said on an idle cluster
    assert (result.processors, result.nodes, result.partition) == (1, "node1", "debug")
    with pytest.raises(SchedulerError, match="unexpected output"):
        parse_test_only(data("sbatch-error-gres.err"))
    # a job larger than the cluster: sbatch --test-only exits 1 with this on stderr, nothing on stdout
    assert data("sbatch-test-only-too-large.err") == (
        "allocation failure: Requested node configuration is not available\n"
    )


def test_squeue_comments() -> None:
    rows = parse_comments(data("squeue-comments.out"))
    assert rows[:3] == [
        (JobId(21), "my run slurmgen:20261121-081500-a1b2c3"),
        (JobId(22, array_tasks="1-3"), "slurmgen:20261121-081501-d4e5f6"),  # a pending array: one row
        (JobId(23), ""),  # "(null)": no comment
    ]
    assert len(rows) == 20 and sum(c.endswith("slurmgen:20261121-081500-a1b2c3") for _, c in rows) == 2
    with pytest.raises(SchedulerError, match="unexpected line"):
        parse_comments("123 no separator\n")


# --- scontrol show job -----------------------------------------------------------------------------------


def summary(rec: dict[str, str]) -> tuple[object, ...]:
    i = job_info(rec)
    return (
        str(i.job_id),
        i.raw_id,
        i.name,
        i.state,
        i.state_name,
        i.reason,
        i.restarts,
        i.requeue,
        i.exit_code,
        i.exit_signal,
        i.nodes,
        i.batch_host,
        i.elapsed,
        i.time_limit,
    )


R, P, H = JobState.RUNNING, JobState.PENDING, JobState.HELD


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "show-job-o-running.out",
            ("7", 7, "train lr=0.1 v2", R, "RUNNING", None, 0, True, 0, 0, "node[2-3]", "node2", 1, YEAR),
        ),
        (
            "show-job-running.out",
            ("7", 7, "train lr=0.1 v2", R, "RUNNING", None, 0, True, 0, 0, "node[2-3]", "node2", 1, YEAR),
        ),
        ("show-job-o-pending.out", ("8", 8, "wide", P, "PENDING", None, 0, True, 0, 0, None, None, 0, None)),
        (
            "show-job-o-held.out",
            ("9", 9, "held", H, "PENDING", "JobHeldUser", 0, True, 0, 0, None, None, 0, None),
        ),
        (
            "show-job-o-norequeue.out",
            ("10", 10, "norequeue", R, "RUNNING", None, 0, False, 0, 0, "node1", "node1", 0, YEAR),
        ),
        (
            "show-job-o-array-task.out",
            ("11_2", 13, "arr", R, "RUNNING", None, 0, True, 0, 0, "node3", "node3", 0, YEAR),
        ),
        (
            "show-job-o-completed.out",
            ("14", 14, "ok", JobState.COMPLETED, "COMPLETED", None, 0, True, 0, 0, "node2", "node2", 0, None),
        ),
        (
            "show-job-completed.out",
            ("14", 14, "ok", JobState.COMPLETED, "COMPLETED", None, 0, True, 0, 0, "node2", "node2", 0, None),
        ),
        (
            "show-job-o-failed.out",
            (
                "15",
                15,
                "bad",
                JobState.FAILED,
                "FAILED",
                "NonZeroExitCode",
                0,
                True,
                3,
                0,
                "node3",
                "node3",
                0,
                None,
            ),
        ),
        (
            "show-job-o-cancelled-pending.out",
            (
                "8",
                8,
                "wide",
                JobState.CANCELLED,
                "CANCELLED",
                "Resources",
                0,
                True,
                0,
                0,
                None,
                None,
                0,
                None,
            ),
        ),
        (
            "show-job-o-cancelled.out",
            (
                "10",
                10,
                "norequeue",
                JobState.CANCELLED,
                "CANCELLED",
                None,
                0,
                False,
                0,
                15,
                "node1",
                "node1",
                1,
                YEAR,
            ),
        ),
        (
            "show-job-o-completing.out",
            (
                "16",
                16,
                "stubborn",
                JobState.COMPLETING,
                "COMPLETING",
                None,
                0,
                True,
                0,
                0,
                "node1",
                "node1",
                0,
                YEAR,
            ),
        ),
        # A requeue: COMPLETING with the restart already counted, then PENDING until BeginTime (cred_expire).
        (
            "show-job-o-requeue-completing.out",
            (
                "17",
                17,
                "rq",
                JobState.COMPLETING,
                "COMPLETING",
                None,
                1,
                True,
                0,
                0,
                "node2",
                "node2",
                0,
                None,
            ),
        ),
        (
            "show-job-o-requeued.out",
            ("17", 17, "rq", P, "PENDING", "BeginTime", 1, True, 0, 0, None, None, 0, None),
        ),
        (
            "show-job-o-requeue-hold.out",
            (
                "18",
                18,
                "rqhold",
                H,
                "PENDING",
                "job_requeued_in_held_state",
                1,
                True,
                0,
                0,
                None,
                None,
                0,
                None,
            ),
        ),
        (
            "show-job-o-special-exit.out",
            (
                "19",
                19,
                "special",
                H,
                "SPECIAL_EXIT",
                "job_requeued_in_held_state",
                1,
                True,
                0,
                0,
                None,
                None,
                0,
                None,
            ),
        ),
        # The time-limit kill comes late (30 s check interval): RunTime 1:29 on a 1:00 limit.
        (
            "show-job-o-timeout.out",
            (
                "2",
                2,
                "timeout",
                JobState.TIMEOUT,
                "TIMEOUT",
                "TimeLimit",
                0,
                True,
                0,
                15,
                "node1",
                "node1",
                89,
                60,
            ),
        ),
    ],
)
def test_show_job_one_record(name: str, expected: tuple[object, ...]) -> None:
    records = parse_show_job(data(name))
    assert len(records) == 1
    assert summary(records[0]) == expected


def test_show_job_values_with_spaces() -> None:
    (rec,) = parse_show_job(data("show-job-o-running.out"))
    base = "/tmp/slurmgen-record/dir with space"
    assert rec["Command"] == f"{base}/my job.sh"
    assert rec["WorkDir"] == base
    assert rec["StdOut"] == rec["StdErr"] == f"{base}/out 7.log"
    assert rec["JobName"] == "train lr=0.1 v2"
    assert rec["TRES"] == "cpu=2,node=2,billing=2"
    assert rec["AllocNode:Sid"] == "localhost:3112"
    assert rec["NtasksPerN:B:S:C"] == "1:0:*:*"
    assert rec["TresPerNode"] == "gres:gpu:2"
    assert rec["Power"] == ""
    info = job_info(rec)
    assert (info.work_dir, info.stdout, info.partition) == (base, f"{base}/out 7.log", "debug")
    assert info.start_time == datetime(2026, 11, 21, 8, 3, 15)
    assert info.submit_time == datetime(2026, 11, 21, 8, 3, 14)


def test_one_line_and_block_forms_agree() -> None:
    for one_line, block in [
        ("show-job-o-running.out", "show-job-running.out"),
        ("show-job-o-completed.out", "show-job-completed.out"),
        ("show-job-o-array.out", "show-job-array.out"),
    ]:
        assert parse_show_job(data(one_line)) == parse_show_job(data(block))


def test_show_job_array_master_lists_every_task() -> None:
    infos = [job_info(r) for r in parse_show_job(data("show-job-o-array.out"))]
    assert [(str(i.job_id), i.raw_id, i.state) for i in infos] == [
        ("11_[3-5%2]", 11, JobState.PENDING),  # the tasks not started yet keep the array's own id
        ("11_2", 13, JobState.RUNNING),
        ("11_1", 12, JobState.RUNNING),
    ]
    assert infos[0].reason == "JobArrayTaskLimit"
    assert [i.job_id.requeue_target() for i in infos[1:]] == ["11_2", "11_1"]


def test_show_job_all_jobs() -> None:
    infos = [job_info(r) for r in parse_show_job(data("show-job-o-all.out"))]
    assert [str(i.job_id) for i in infos] == [
        "1",
        "2",
        "3",
        "4",
        "6",
        "7",
        "8",
        "9",
        "10",
        "11_1",
        "11_2",
        "11_[3-5%2]",
    ]
    # job 1 is up.sh's smoke test (srun, not a batch job); job 6 was refused at submit yet left a record
    assert (infos[0].name, infos[0].fields["BatchFlag"]) == ("hostname", "0")
    assert (infos[4].state, infos[4].reason, infos[4].fields["TresPerNode"]) == (
        JobState.FAILED,
        "BadConstraints",
        "gres:gpu:3",
    )


def test_show_job_het_components() -> None:
    infos = [job_info(r) for r in parse_show_job(data("handwritten-show-job-o-het.out"))]
    assert [(str(i.job_id), i.raw_id, i.name, i.nodes) for i in infos] == [
        ("123+0", 123, "het job", "node[2-3]"),
        ("123+1", 124, "het job", "node1"),
    ]
    assert {i.job_id.requeue_target() for i in infos} == {"123"}  # a het job is requeued as a whole
    assert infos[1].fields["HetJobIdSet"] == "123-124"


def test_show_job_states_not_seen_on_the_test_cluster() -> None:
    infos = [job_info(r) for r in parse_show_job(data("handwritten-show-job-o-states.out"))]
    assert [(i.state_name, i.state) for i in infos] == [
        ("NODE_FAIL", JobState.FAILED),
        ("OUT_OF_MEMORY", JobState.FAILED),
        ("PREEMPTED", JobState.PREEMPTED),
        ("BOOT_FAIL", JobState.FAILED),
        ("DEADLINE", JobState.FAILED),
        ("SUSPENDED", JobState.SUSPENDED),
        ("FROBNICATED", JobState.UNKNOWN),
    ]


@pytest.mark.parametrize("text", ["", "\n", "No jobs in the system\n"])
def test_show_job_nothing(text: str) -> None:
    assert parse_show_job(text) == []


@pytest.mark.parametrize("text", ["slurm_load_jobs error: Invalid job id specified\n", "   UserId=root(0)\n"])
def test_show_job_rejects_what_is_not_a_record(text: str) -> None:
    with pytest.raises(SchedulerError, match="unexpected line"):
        parse_show_job(text)


def test_show_job_record_without_state() -> None:
    with pytest.raises(SchedulerError, match="without JobId/JobState"):
        job_info({"JobId": "5", "JobName": "x"})


# --- squeue ----------------------------------------------------------------------------------------------


def test_squeue_all_states() -> None:
    rows = parse_squeue(data("squeue.out"))
    assert [(str(r.job_id), r.raw_id, r.state, r.reason, r.nodes, r.name) for r in rows] == [
        ("1", 1, JobState.COMPLETED, None, "node[1-3]", "hostname"),
        ("3", 3, JobState.COMPLETED, None, "node1", "wrap"),
        ("4", 4, JobState.COMPLETED, None, "node2", "wrap"),
        ("6", 6, JobState.FAILED, "BadConstraints", None, "wrap"),
        ("8", 8, JobState.PENDING, "Resources", None, "wide"),
        ("11_[3-5%2]", 11, JobState.PENDING, "JobArrayTaskLimit", None, "arr"),
        ("9", 9, JobState.PENDING, "JobHeldUser", None, "held"),
        ("2", 2, JobState.RUNNING, None, "node1", "timeout"),
        ("7", 7, JobState.RUNNING, None, "node[2-3]", "train lr=0.1 v2"),
        ("10", 10, JobState.RUNNING, None, "node1", "norequeue"),
        ("11_1", 12, JobState.RUNNING, None, "node2", "arr"),
        ("11_2", 13, JobState.RUNNING, None, "node3", "arr"),
    ]
    timeout = rows[7]
    assert (timeout.elapsed, timeout.time_limit, timeout.num_nodes, timeout.partition) == (3, 60, 1, "debug")
    assert (rows[8].time_limit, rows[8].num_nodes, rows[4].time_limit) == (YEAR, 2, None)


def test_squeue_one_array_job() -> None:
    rows = parse_squeue(data("squeue-array-job.out"))
    assert [(str(r.job_id), r.raw_id, r.state_name) for r in rows] == [
        ("11_[3-5%2]", 11, "PENDING"),
        ("11_2", 13, "RUNNING"),
        ("11_1", 12, "RUNNING"),
    ]


def test_squeue_het_and_array_forms() -> None:
    rows = parse_squeue(data("handwritten-squeue-het-and-arrays.out"))
    assert [(r.job_id, r.raw_id, r.state, r.elapsed, r.time_limit, r.name) for r in rows] == [
        (JobId(123, het_offset=0), 123, JobState.RUNNING, 17 * 60 + 3, 3600, "het job"),
        (JobId(123, het_offset=1), 124, JobState.RUNNING, 17 * 60 + 3, 3600, "het job"),
        (JobId(20, array_tasks="2-7,12-17,22%56"), 20, JobState.PENDING, 0, 2 * 86400, "sweep"),
        (JobId(20, array_task=0), 21, JobState.COMPLETING, 93784, 2 * 86400, "sweep"),
        # the name is the last field, so a separator inside it stays in the name
        (
            JobId(57829110, array_tasks="5-100"),
            57829110,
            JobState.PENDING,
            0,
            None,
            "name\x1fwith\x1fseparators",
        ),
    ]
    assert rows[4].reason is None


def test_squeue_rejects_other_formats() -> None:
    with pytest.raises(SchedulerError, match="--format"):
        parse_squeue("  JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)\n")
