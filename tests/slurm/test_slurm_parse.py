"""Parsing every recorded (and hand-written) scheduler output in tests/data/slurm/ to its exact outcome.

Each test of recorded output runs once per Slurm version (tests/data/slurm/<version>/, `@every_version`). The
recordings come from one script run on a fresh cluster, so ids and names agree across versions; where Slurm
itself varies from run to run (which node, COMPLETING or PENDING right after a requeue) the expectation is a
`OneOf`. Where versions differ on purpose, the test says which prints what.
"""

from __future__ import annotations

import json
import re

import pytest
from recorded import VERSIONS, every_version, recorded, recorded_text

from slurmgen.errors import SchedulerError, UsageError
from slurmgen.slurm.ids import (
    JobId,
    JobState,
    check_cluster_name,
    cluster_label,
    parse_cluster_job,
    parse_duration,
    parse_job_id,
    parse_state,
)
from slurmgen.slurm.parse import (
    Submitted,
    parse_comments,
    parse_sbatch_output,
    parse_squeue,
    parse_steps,
    parse_test_only,
)
from slurmgen.slurm.showjob import FREE_TEXT_KEYS, JobInfo, job_info, parse_show_job

YEAR = 365 * 24 * 3600  # Slurm shows a partition's INFINITE limit to a running job as 365-00:00:00
RECORD_DIR = "/tmp/slurmgen-record"  # where tests/cluster/record-output.sh runs its jobs


def data(name: str, version: str = VERSIONS[0]) -> str:
    return recorded_text(name, version)


class OneOf:
    """Equal to any of ``values``: for what a real Slurm decides differently from run to run."""

    def __init__(self, *values: object) -> None:
        self.values = values

    def __eq__(self, other: object) -> bool:
        return other in self.values

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"OneOf{self.values!r}"


ANY_NODE = OneOf("node1", "node2", "node3")
# TimeLimit=UNLIMITED or 365-00:00:00 (tests/data/slurm/README.md, "Forms that differ")
UNLIMITED_OR_YEAR = OneOf(None, YEAR)


def test_every_version_has_every_recording() -> None:
    """The same commands were recorded on every version: a name means the same file everywhere."""
    names = {v: {line.split("\t")[0] for line in data("MANIFEST.txt", v).splitlines()} for v in VERSIONS}
    assert sorted(VERSIONS) == VERSIONS and {"22.05", "24.11", "25.11", "26.05"} <= set(VERSIONS)
    assert all(names[v] == names[VERSIONS[0]] for v in VERSIONS)
    assert [data("VERSION", v).split()[1].rsplit(".", 1)[0] for v in VERSIONS] == VERSIONS


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
        ("handwritten-sbatch-parsable-cluster.out", Submitted(JobId(42), "alpha")),
        ("handwritten-sbatch-on-cluster.out", Submitted(JobId(42), "alpha")),
        ("handwritten-sbatch-banner.out", Submitted(JobId(4567), None)),
        ("handwritten-sbatch-parsable-banner.out", Submitted(JobId(4567), None)),
    ],
)
def test_sbatch_output_handwritten(name: str, expected: Submitted) -> None:
    assert parse_sbatch_output(data(name)) == expected


@pytest.mark.parametrize(
    ("text", "cluster", "job"),
    [
        ("alpha:42", "alpha", JobId(42)),  # how slurmgen shows a job of cluster alpha
        ("42;alpha", "alpha", JobId(42)),  # how `sbatch --parsable -M alpha` answers (src/sbatch/sbatch.c)
        (" gpu-2.a:42_3\n", "gpu-2.a", JobId(42, array_task=3)),
        ("b:42+1.batch", "b", JobId(42, het_offset=1, step="batch")),
        ("42", None, JobId(42)),
    ],
)
def test_a_job_id_with_its_cluster(text: str, cluster: str | None, job: JobId) -> None:
    assert parse_cluster_job(text) == (cluster, job)
    assert parse_cluster_job(cluster_label(cluster, job)) == (cluster, job)  # what is shown reads back


@pytest.mark.parametrize("text", ["alpha:", ":42", "al pha:42", "42;", "42;-M", "42;a b", "-x:42", "alpha:42;beta"])
def test_a_job_id_with_a_cluster_is_checked_whole(text: str) -> None:
    with pytest.raises(UsageError, match="not a Slurm job id"):
        parse_cluster_job(text)


def test_a_cluster_name_is_checked() -> None:
    assert check_cluster_name("alpha_2") == "alpha_2"
    with pytest.raises(UsageError, match="--clusters: not a Slurm cluster name: 'a,b'"):
        check_cluster_name("a,b", "--clusters")


@every_version
def test_sbatch_output(version: str) -> None:
    assert parse_sbatch_output(data("sbatch-parsable.out", version)) == Submitted(JobId(3), None)
    assert parse_sbatch_output(data("sbatch-plain.out", version)) == Submitted(JobId(4), None)
    assert parse_sbatch_output(data("sbatch-het.out", version)) == Submitted(JobId(28), None)  # the leader's id


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


@every_version
def test_sbatch_test_only(version: str) -> None:
    text = data("sbatch-test-only.err", version)
    result = parse_test_only(text)
    # A start time (the recording's "now", or the year 4748 when Slurm's estimate has nothing to go by)
    assert result.start is not None and result.start.year > 2000
    assert (result.processors, result.partition) == (1, "debug") and result.nodes in {"node1", "node2", "node3"}
    assert (" a using " in text) == (version >= "25.05")  # a stray " a" in 26.05's format string
    with pytest.raises(SchedulerError, match="unexpected output"):
        parse_test_only(data("sbatch-error-gres.err", version))
    # a job larger than the cluster: sbatch --test-only exits 1 with this on stderr, nothing on stdout
    too_large = recorded("sbatch-test-only-too-large", version)
    assert (too_large.returncode, too_large.stdout) == (1, "")
    assert too_large.stderr == "allocation failure: Requested node configuration is not available\n"


@every_version
def test_squeue_comments(version: str) -> None:
    rows = parse_comments(data("squeue-comments.out", version))
    assert sorted(rows, key=lambda row: row[0].job) == [
        (JobId(21), "my run slurmgen:20261121-081500-a1b2c3"),
        (JobId(22, array_tasks="1-3"), "slurmgen:20261121-081501-d4e5f6"),  # a pending array: one row
        (JobId(23), ""),  # "(null)": no comment
        (JobId(24), "again slurmgen:20261121-081500-a1b2c3"),
    ]
    with pytest.raises(SchedulerError, match="unexpected line"):
        parse_comments("123 no separator\n")


# --- scontrol show job -----------------------------------------------------------------------------------


def summary(info: JobInfo) -> tuple[object, ...]:
    i = info
    return (str(i.job_id), i.raw_id, i.name, i.state, i.state_name, i.reason, i.restarts, i.requeue,
            i.exit_code, i.exit_signal, i.nodes, i.batch_host, i.time_limit)  # fmt: skip


R, P, H = JobState.RUNNING, JobState.PENDING, JobState.HELD
C, CG = JobState.CANCELLED, JobState.COMPLETING
# Right after a requeue Slurm shows the job COMPLETING on its node or already PENDING (BeginTime).
REQUEUED_STATE = (OneOf(CG, P), OneOf("COMPLETING", "PENDING"), OneOf(None, "BeginTime"))
ONE_RECORD = {
    "show-job-o-running": ("7", 7, "train lr=0.1 v2", R, "RUNNING", None, 0, True, 0, 0, "node[2-3]", "node2", YEAR),
    "show-job-running": ("7", 7, "train lr=0.1 v2", R, "RUNNING", None, 0, True, 0, 0, "node[2-3]", "node2", YEAR),
    # Reason=None or Resources: a moment after submission the scheduler may not have looked at it yet
    "show-job-o-pending": ("8", 8, "wide", P, "PENDING", OneOf(None, "Resources"), 0, True, 0, 0, None, None, None),
    "show-job-o-held": ("9", 9, "held", H, "PENDING", "JobHeldUser", 0, True, 0, 0, None, None, None),
    "show-job-o-norequeue": ("10", 10, "norequeue", R, "RUNNING", None, 0, False, 0, 0, "node1", "node1", YEAR),
    "show-job-o-array-task": ("11_2", 13, "arr", R, "RUNNING", None, 0, True, 0, 0, "node3", "node3", YEAR),
    # a task still inside the pending range is shown by the array's own record
    "show-job-o-array-pending-task": (
        "11_4", 11, "arr", P, "PENDING", "JobArrayTaskLimit", 0, True, 0, 0, None, None, None),
    "show-job-o-completed": ("14", 14, "ok", JobState.COMPLETED, "COMPLETED", None, 0, True, 0, 0, ANY_NODE,
                             ANY_NODE, UNLIMITED_OR_YEAR),
    "show-job-completed": ("14", 14, "ok", JobState.COMPLETED, "COMPLETED", None, 0, True, 0, 0, ANY_NODE, ANY_NODE,
                           UNLIMITED_OR_YEAR),
    "show-job-o-failed": ("15", 15, "bad", JobState.FAILED, "FAILED", "NonZeroExitCode", 0, True, 3, 0, ANY_NODE,
                          ANY_NODE, UNLIMITED_OR_YEAR),
    "show-job-o-cancelled-pending": ("8", 8, "wide", C, "CANCELLED", "Resources", 0, True, 0, 0, None, None, None),
    "show-job-o-cancelled": ("10", 10, "norequeue", C, "CANCELLED", None, 0, False, 0, 15, "node1", "node1", YEAR),
    # SIGTERM ignored: COMPLETING for KillWait (5 s), with signal 9 once SIGKILL has come and it still completes
    "show-job-o-completing": ("16", 16, "stubborn", CG, "COMPLETING", None, 0, True, 0, OneOf(0, 9), "node1", "node1",
                              UNLIMITED_OR_YEAR),
    # A requeue: COMPLETING with the restart already counted, then PENDING until BeginTime (cred_expire).
    "show-job-o-requeue-completing": ("17", 17, "rq", *REQUEUED_STATE, 1, True, 0, 0, OneOf("node2", None),
                                      OneOf("node2", None), None),
    "show-job-o-requeued": ("17", 17, "rq", P, "PENDING", "BeginTime", 1, True, 0, 0, None, None, None),
    "show-job-o-requeue-hold": (
        "18", 18, "rqhold", H, "PENDING", "job_requeued_in_held_state", 1, True, 0, 0, None, None, None),
    "show-job-o-special-exit": (
        "19", 19, "special", H, "SPECIAL_EXIT", "job_requeued_in_held_state", 1, True, 0, 0, None, None, None),
    "show-job-o-array-task-requeued": ("25_1", 27, "arrq", *REQUEUED_STATE, 1, True, 0, 0, OneOf(None, "node2"),
                                       OneOf(None, "node2"), UNLIMITED_OR_YEAR),
    # The time-limit kill comes late (30 s check interval): RunTime above the 1:00 limit.
    "show-job-o-timeout": ("2", 2, "timeout", JobState.TIMEOUT, "TIMEOUT", "TimeLimit", 0, True, 0, 15, "node1",
                           "node1", 60),
    # Preemption (partitions from tests/cluster/up.sh): RUNNING during the grace time, PENDING after Slurm's own
    # requeue (Restarts counts it), PREEMPTED under PreemptMode=CANCEL (here its sleep died of SIGTERM).
    "show-job-o-preempt-grace": ("30", 30, "victim", R, "RUNNING", None, 0, True, 0, 0, "node3", "node3", 600),
    "show-job-o-preemptor-pending": ("31", 31, "preemptor", P, "PENDING", "Resources", 0, True, 0, 0, None, None,
                                     None),
    "show-job-o-preempt-requeued": ("30", 30, "victim", *REQUEUED_STATE, 1, True, 0, 0, OneOf(None, "node3"),
                                    OneOf(None, "node3"), 600),
    "show-job-o-preempted": ("32", 32, "cvictim", JobState.PREEMPTED, "PREEMPTED", None, 0, True, 0, 15, "node3",
                             "node3", 600),
}  # fmt: skip


@every_version
@pytest.mark.parametrize("name", list(ONE_RECORD))
def test_show_job_one_record(name: str, version: str) -> None:
    records = parse_show_job(data(f"{name}.out", version))
    assert len(records) == 1
    info = job_info(records[0])
    assert summary(info) == ONE_RECORD[name]
    assert info.elapsed is not None and info.elapsed >= 0
    assert set(records[0]) >= {"JobId", "JobName", "JobState", "Partition", "NodeList", "Command", "WorkDir"}


@every_version
def test_show_job_times_and_preemption(version: str) -> None:
    def info(name: str) -> JobInfo:
        (rec,) = parse_show_job(data(f"{name}.out", version))
        return job_info(rec)

    assert 60 < (info("show-job-o-timeout").elapsed or 0) <= 95  # killed on the first 30 s check after 1:00
    running = info("show-job-o-running")
    assert running.start_time is not None and running.submit_time is not None
    assert running.end_time is not None and (running.end_time - running.start_time).days == 365
    grace = info("show-job-o-preempt-grace")
    assert grace.preempt_time is not None and grace.end_time is not None and grace.start_time is not None
    # During the grace time EndTime is PreemptTime + GraceTime (10 s), within the second
    assert 9 <= (grace.end_time - grace.preempt_time).total_seconds() <= 11
    assert grace.fields["Partition"] == "low-requeue-grace" and "PreemptEligibleTime" in grace.fields
    # After Slurm's requeue the record has no PreemptTime= at all (printed only while preemptable_time is set)
    assert info("show-job-o-preempt-requeued").preempt_time is None
    assert "PreemptTime" not in info("show-job-o-preempt-requeued").fields
    assert info("show-job-o-preempted").preempt_time is not None
    assert "PreemptTime" not in info("show-job-o-running").fields  # debug is not a preemptable partition


@every_version
def test_show_job_values_with_spaces(version: str) -> None:
    (rec,) = parse_show_job(data("show-job-o-running.out", version))
    base = f"{RECORD_DIR}/dir with space"
    assert rec["Command"] == f"{base}/my job.sh"
    assert rec["WorkDir"] == base
    assert rec["StdOut"] == f"{base}/out 7.log"
    assert rec["JobName"] == "train lr=0.1 v2"
    assert rec["NtasksPerN:B:S:C"] == "1:0:*:*"
    assert rec["AllocNode:Sid"].endswith(":4771") or rec["AllocNode:Sid"].startswith("localhost:")
    info = job_info(rec)
    assert (info.work_dir, info.stdout, info.partition) == (base, f"{base}/out 7.log", "debug")
    if version < "23.11":
        assert (rec["TRES"], rec["TresPerNode"], rec["Power"]) == ("cpu=2,node=2,billing=2", "gres:gpu:2", "")
    else:  # TRES= split into requested and allocated; gres/ instead of gres:; Power= gone
        assert (rec["ReqTRES"], rec["AllocTRES"]) == ("cpu=2,mem=4000M,node=2,billing=2", "cpu=2,node=2,billing=2")
        assert rec["TresPerNode"] == "gres/gpu:2" and "TRES" not in rec and "Power" not in rec
    if version < "25.11":
        assert rec["StdErr"] == rec["StdOut"] and "SubmitLine" not in rec
    else:  # StdErr= empty without -e; the whole sbatch command line in SubmitLine=, LicensesAlloc=
        assert info.stderr is None and rec["StdErr"] == ""
        assert rec["SubmitLine"] == (
            f"/usr/bin/sbatch --parsable -N2 --ntasks-per-node=1 -w node[2-3] -J train lr=0.1 v2 -o {base}/out %j.log "
            "--gres=gpu:2 my job.sh"
        )
        assert rec["LicensesAlloc"] == "(null)"
    # Exclusive= from 26.05 (src/scontrol/info_job.c of 26.05; 25.11 prints OverSubscribe= then Contiguous=)
    assert rec.get("Exclusive") == ("NO" if version >= "26.05" else None)


@every_version
def test_pending_without_nodes_asked(version: str) -> None:
    (rec,) = parse_show_job(data("show-job-o-held.out", version))
    assert rec["NumNodes"] == ("1" if version < "23.11" else "1-1")
    assert job_info(rec).num_nodes == 1


RUNNING_26_05 = data("show-job-o-running.out", "26.05").strip()


@pytest.mark.parametrize(
    ("edit", "changed"),
    [
        # The submit line is the user's argv: it may hold " WorkDir=" and any other "Key=" text.
        ("--gres=gpu:2 my job.sh", "--comment x WorkDir=/fake Partition=high Foo=1 my job.sh"),
        # A key that a newer Slurm adds becomes a field of its own and shifts no known one.
        ("OverSubscribe=NO", "OverSubscribe=NO NewKey=some value"),
        ("TresPerNode=gres/gpu:2", "TresPerNode=gres/gpu:2 AnotherNewKey=x"),
        # A job name may look like keys too.
        ("JobName=train lr=0.1 v2", "JobName=train Partition=x WorkDir=/y"),
    ],
)
def test_show_job_free_text_never_splits_a_record(edit: str, changed: str) -> None:
    (original,) = parse_show_job(RUNNING_26_05)
    assert edit in RUNNING_26_05
    (rec,) = parse_show_job(RUNNING_26_05.replace(edit, changed))
    differing = {k for k in set(original) | set(rec) if original.get(k) != rec.get(k)}
    new_keys = {k for k in rec if k not in original}
    assert rec["WorkDir"] == original["WorkDir"] and rec["Partition"] == "debug" and rec["UserId"] == "root(0)"
    assert differing - new_keys <= {"SubmitLine", "JobName", "OverSubscribe", "TresPerNode"}
    if "SubmitLine" in differing:
        assert rec["SubmitLine"] == original["SubmitLine"].replace(edit, changed)
    if "JobName" in differing:
        assert rec["JobName"] == "train Partition=x WorkDir=/y"
    assert new_keys <= {"NewKey", "AnotherNewKey"}
    assert rec.get("NewKey", "some value") == "some value" and rec.get("AnotherNewKey", "x") == "x"
    assert rec["OverSubscribe"] == "NO" and rec["TresPerNode"] == "gres/gpu:2"
    assert {"JobName", "Command", "SubmitLine", "Comment"} <= FREE_TEXT_KEYS


@every_version
def test_one_line_and_block_forms_agree(version: str) -> None:
    for one_line, block in [
        ("show-job-o-running.out", "show-job-running.out"),
        ("show-job-o-completed.out", "show-job-completed.out"),
        ("show-job-o-array.out", "show-job-array.out"),
    ]:
        assert parse_show_job(data(one_line, version)) == parse_show_job(data(block, version))


@every_version
def test_show_job_array_master_lists_every_task(version: str) -> None:
    infos = [job_info(r) for r in parse_show_job(data("show-job-o-array.out", version))]
    assert [(str(i.job_id), i.raw_id, i.state) for i in infos] == [
        ("11_[3-5%2]", 11, JobState.PENDING),  # the tasks not started yet keep the array's own id
        ("11_2", 13, JobState.RUNNING),
        ("11_1", 12, JobState.RUNNING),
    ]
    assert infos[0].reason == "JobArrayTaskLimit"
    assert [i.job_id.requeue_target() for i in infos[1:]] == ["11_2", "11_1"]


@every_version
def test_show_job_of_a_requeued_array(version: str) -> None:
    infos = [job_info(r) for r in parse_show_job(data("show-job-o-array-requeued.out", version))]
    assert sorted((str(i.job_id), i.raw_id, i.restarts) for i in infos) == [("25_0", 26, 2), ("25_1", 27, 2),
                                                                           ("25_2", 25, 2)]  # fmt: skip
    assert all(i.state in {JobState.COMPLETING, JobState.PENDING} for i in infos)


@every_version
def test_show_job_all_jobs(version: str) -> None:
    infos = [job_info(r) for r in parse_show_job(data("show-job-o-all.out", version))]
    assert [str(i.job_id) for i in infos] == ["1", "2", "3", "4", "6", "7", "8", "9", "10", "11_1", "11_2",
                                              "11_[3-5%2]"]  # fmt: skip
    # job 1 is up.sh's smoke test (srun, not a batch job); job 6 was refused at submit yet left a record
    assert (infos[0].name, infos[0].fields["BatchFlag"]) == ("hostname", "0")
    gres = "gres:gpu:3" if version < "23.11" else "gres/gpu:3"
    assert (infos[4].state, infos[4].reason, infos[4].fields["TresPerNode"]) == (JobState.FAILED, "BadConstraints",
                                                                                  gres)  # fmt: skip


@every_version
def test_show_job_het_components(version: str) -> None:
    infos = [job_info(r) for r in parse_show_job(data("show-job-o-het.out", version))]
    assert [(str(i.job_id), i.raw_id, i.name, i.nodes) for i in infos] == [
        ("28+0", 28, "het", "node1"),
        ("28+1", 29, "het", "node2"),
    ]
    assert {i.job_id.requeue_target() for i in infos} == {"28"}  # a het job is requeued as a whole
    assert infos[1].fields["HetJobIdSet"] == "28-29"


def test_show_job_het_components_handwritten() -> None:
    infos = [job_info(r) for r in parse_show_job(data("handwritten-show-job-o-het.out"))]
    assert [(str(i.job_id), i.raw_id, i.name, i.nodes) for i in infos] == [
        ("123+0", 123, "het job", "node[2-3]"),
        ("123+1", 124, "het job", "node1"),
    ]
    assert {i.job_id.requeue_target() for i in infos} == {"123"}
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


@every_version
def test_show_job_invalid_is_on_stderr(version: str) -> None:
    answer = recorded("show-job-invalid", version)
    assert (answer.returncode, answer.stdout) == (1, "")
    assert "Invalid job id specified" in answer.stderr


def test_show_job_record_without_state() -> None:
    with pytest.raises(SchedulerError, match="without JobId/JobState"):
        job_info({"JobId": "5", "JobName": "x"})


# --- squeue ----------------------------------------------------------------------------------------------


def rows_of(name: str, version: str) -> list[tuple[object, ...]]:
    # squeue's order differs between versions; each row is compared, sorted by the job's own id
    rows = parse_squeue(data(name, version))
    fields = [(str(r.job_id), r.raw_id, r.state, r.reason, r.nodes, r.name, r.time_limit, r.num_nodes, r.partition)
              for r in rows]  # fmt: skip
    return sorted(fields, key=lambda f: (f[1], f[0]))


@every_version
def test_squeue_all_states(version: str) -> None:
    assert rows_of("squeue.out", version) == [
        ("1", 1, JobState.COMPLETED, None, "node[1-3]", "hostname", None, 3, "debug"),
        ("2", 2, JobState.RUNNING, None, "node1", "timeout", 60, 1, "debug"),
        ("3", 3, JobState.COMPLETED, None, "node1", "wrap", YEAR, 1, "debug"),
        ("4", 4, JobState.COMPLETED, None, "node2", "wrap", YEAR, 1, "debug"),
        ("6", 6, JobState.FAILED, "BadConstraints", None, "wrap", None, 1, "debug"),
        ("7", 7, JobState.RUNNING, None, "node[2-3]", "train lr=0.1 v2", YEAR, 2, "debug"),
        ("8", 8, JobState.PENDING, "Resources", None, "wide", None, 3, "debug"),
        ("9", 9, JobState.PENDING, "JobHeldUser", None, "held", None, 1, "debug"),
        ("10", 10, JobState.RUNNING, None, "node1", "norequeue", YEAR, 1, "debug"),
        ("11_[3-5%2]", 11, JobState.PENDING, "JobArrayTaskLimit", None, "arr", None, 1, "debug"),
        ("11_1", 12, JobState.RUNNING, None, "node2", "arr", YEAR, 1, "debug"),
        ("11_2", 13, JobState.RUNNING, None, "node3", "arr", YEAR, 1, "debug"),
    ]


@every_version
def test_squeue_one_array_job(version: str) -> None:
    rows = parse_squeue(data("squeue-array-job.out", version))
    assert [(str(r.job_id), r.raw_id, r.state_name) for r in rows] == [
        ("11_[3-5%2]", 11, "PENDING"),
        ("11_2", 13, "RUNNING"),
        ("11_1", 12, "RUNNING"),
    ]


@every_version
def test_squeue_het_preemption_and_a_requeued_task(version: str) -> None:
    assert rows_of("squeue-het.out", version) == [
        ("28+0", 28, JobState.RUNNING, None, "node1", "het", None, 1, "debug"),
        ("28+1", 29, JobState.RUNNING, None, "node2", "het", None, 1, "debug"),
    ]
    assert rows_of("squeue-preempt-grace.out", version) == [
        ("30", 30, JobState.RUNNING, None, "node3", "victim", 600, 1, "low-requeue-grace"),
        ("31", 31, JobState.PENDING, "Resources", None, "preemptor", None, 1, "high"),
    ]
    rows = {row[0]: row for row in rows_of("squeue-array-task-requeued.out", version)}
    assert rows["25_1"][1:5] in [(27, JobState.PENDING, "BeginTime", None), (27, JobState.COMPLETING, None, "node2")]
    assert (rows["25_0"][2], rows["25_2"][2], len(rows)) == (JobState.RUNNING, JobState.RUNNING, 3)


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


# --- what each version answers that slurmgen reads as text ------------------------------------------------


@every_version
def test_requeue_answers(version: str) -> None:
    """scontrol requeue: one task or a running array print nothing; the errors are on stderr, exit 1."""
    for name in ["requeue-running", "requeue-array-task", "requeue-array", "requeue-incomplete-pending"]:
        answer = recorded(name, version)
        assert (answer.returncode, answer.stdout, answer.stderr) == (0, "", ""), name
    assert "Job is pending execution" in recorded("requeue-pending", version).stderr
    assert "Requested operation is presently disabled" in recorded("requeue-disabled", version).stderr
    assert "Invalid job id specified" in recorded("requeue-invalid", version).stderr
    # A whole array with one task between its runs: one line per group of tasks; 26.05 brackets them
    partly = recorded("requeue-array-partly", version)
    groups = ("25_0,2", "25_1") if version < "26.05" else ("25_[0,2]", "25_[1]")
    assert partly.returncode == 1
    assert partly.stderr.splitlines() == [f"{groups[0]}: No error", f"{groups[1]}: Job is pending execution"]


@every_version
def test_job_log_banners(version: str) -> None:
    # From 25.05 slurmstepd's lines carry the time instead of its name (src/common/log.c, SchedMD/slurm commit
    # 2ee5b6b760) and name the signal where older versions name no cause (src/slurmd/slurmstepd/req.c, commit
    # f7bc53fb04); a CANCEL preemption's kill is sometimes reported that way too (its slurmstepd may see the TERM
    # before the preemption's cancel reason)
    new = version >= "25.05"
    prefix = r"\[\d{4}-\d\d-\d\dT[\d:.]+\] error: " if new else r"slurmstepd-node\d: error: "
    when = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
    signalled = " DUE to SIGNAL Terminated" if new else ""
    preempted = "( DUE TO PREEMPTION| DUE to SIGNAL Terminated)" if new else " DUE TO PREEMPTION"
    expected = {
        "banner-timeout": rf"\*\*\* JOB 2 ON node1 CANCELLED AT {when} DUE TO TIME LIMIT \*\*\*",
        "banner-preemption": rf"\*\*\* JOB 32 ON node3 CANCELLED AT {when}{preempted} \*\*\*",
        "banner-preemption-grace": rf"\*\*\* JOB 30 ON node3 CANCELLED AT {when} DUE TO PREEMPTION \*\*\*",
        "banner-requeue": rf"\*\*\* JOB 17 ON node2 CANCELLED AT {when} DUE TO JOB REQUEUE \*\*\*",
        "banner-cancel": rf"\*\*\* JOB 7 ON node2 CANCELLED AT {when}{signalled} \*\*\*",
    }
    for name, pattern in expected.items():
        lines = data(f"{name}.out", version).splitlines()
        job_lines = [line for line in lines if " JOB " in line]  # the STEP line may come first
        assert re.fullmatch(prefix + pattern, job_lines[0]), (name, lines)
    assert ("DUE to SIGNAL" in data("banner-cancel.out", version)) == new


@every_version
def test_show_hostnames_answers(version: str) -> None:
    """Every `scontrol show hostnames` answer exits 0, errors included; the versions disagree on two lists."""
    rc = {line.split("\t")[0]: line.split("\t")[1] for line in data("MANIFEST.txt", version).splitlines()}
    assert all(rc[n] == "rc=0" for n in rc if n.startswith("hostnames"))
    assert recorded("hostnames", version).stdout.split() == ["node1", "node2", "node3", "gpu-01", "gpu-02"]
    assert recorded("hostnames-empty-item", version).stdout.split() == ["a", "b"]
    for name in ["hostnames-reversed-range", "hostnames-double-range", "hostnames-letter-range"]:
        answer = recorded(name, version)
        assert answer.stdout == "" and "Invalid hostlist" in answer.stderr
    suffix, unclosed = recorded("hostnames-invalid", version), recorded("hostnames-unclosed", version)
    if version < "23.11":
        assert (suffix.stdout, suffix.stderr.strip()) == ("", "Invalid hostlist: node[1-2]-ib")
        assert (unclosed.stdout, unclosed.stderr) == ("n]\n", "")  # 22.05 prints nonsense for "n[1-2"
    else:  # a suffix after the brackets is valid from 23.11
        assert (suffix.stdout.split(), suffix.stderr) == (["node1-ib", "node2-ib"], "")
        assert (unclosed.stdout, unclosed.stderr.strip()) == ("", "Invalid hostlist: n[1-2")


@every_version
def test_show_config_user_signal_spelling(version: str) -> None:
    def params(name: str) -> dict[str, str]:
        pairs = (line.split("=", 1) for line in data(name, version).splitlines() if " = " in line)
        return {k.strip(): v.strip() for k, v in pairs}

    off, on = params("show-config.out"), params("show-config-user-signal.out")
    assert (off["PreemptType"], off["PreemptMode"], off["KillWait"]) == ("preempt/partition_prio", "REQUEUE", "5 sec")
    if version < "23.02":
        assert (off["SlurmctldParameters"], on["SlurmctldParameters"]) == ("(null)", "preempt_send_user_signal")
        assert "PreemptParameters" not in on
    else:
        assert (off["PreemptParameters"], on["PreemptParameters"]) == ("(null)", "send_user_signal")
    partitions = {line.split()[0].removeprefix("PartitionName="): line
                  for line in data("show-partition-o.out", version).splitlines()}  # fmt: skip
    assert list(partitions) == ["debug", "high", "low-requeue", "low-requeue-grace", "low-cancel", "low-cancel-grace"]
    assert " GraceTime=10 " in partitions["low-cancel-grace"] and " PreemptMode=CANCEL " in partitions["low-cancel"]
    assert " PreemptMode=OFF " in partitions["debug"] and " PriorityTier=2 " in partitions["high"]


@every_version
def test_squeue_json(version: str) -> None:
    """`squeue --json`: 22.05 lists every job in the queue, 24.11 and 26.05 only pending and running ones."""
    answer = json.loads(data("squeue-json.out", version))
    states = {s for job in answer["jobs"] for s in (job["job_state"] if isinstance(job["job_state"], list)
                                                    else [job["job_state"]])}  # fmt: skip
    if version < "23.11":
        assert states == {"COMPLETED", "FAILED", "PENDING", "RUNNING"}
    else:
        assert states == {"PENDING", "RUNNING"}


# `scontrol -o show step` as Slurm 22.05.8 printed it on the test cluster (a job, an array task); not yet among the
# per-version recordings: tests/cluster/record-output.sh records it as show-step-o* from the next recording on.
SHOW_STEP = (
    "StepId=25.batch UserId=0 StartTime=2026-11-23T02:27:34 TimeLimit=UNLIMITED State=RUNNING Partition=debug "
    "NodeList=node2 Nodes=1 CPUs=0 Tasks=1 Name=batch Network=(null) TRES=(null) ResvPorts=(null) "
    "CPUFreqReq=Default SrunHost:Pid=(null):0\n"
    "StepId=25.0 UserId=0 StartTime=2026-11-23T02:27:34 TimeLimit=UNLIMITED State=RUNNING Partition=debug "
    "NodeList=node2 Nodes=1 CPUs=1 Tasks=1 Name=sleep Network=(null) TRES=cpu=1,mem=0,node=1 ResvPorts=(null) "
    "CPUFreqReq=Default Dist=Cyclic SrunHost:Pid=node2:32695\n"
)
SHOW_STEP_ARRAY_TASK = (
    "StepId=23_1.batch UserId=0 StartTime=2026-11-23T02:27:31 TimeLimit=UNLIMITED State=RUNNING Partition=debug "
    "NodeList=node1 Nodes=1 CPUs=0 Tasks=1 Name=batch Network=(null) TRES=(null) ResvPorts=(null) "
    "CPUFreqReq=Default SrunHost:Pid=(null):0\n"
    "StepId=23_1.0 UserId=0 StartTime=2026-11-23T02:27:31 TimeLimit=UNLIMITED State=RUNNING Partition=debug "
    "NodeList=node1 Nodes=1 CPUs=1 Tasks=1 Name=sleep Network=(null) TRES=cpu=1,mem=0,node=1 ResvPorts=(null) "
    "CPUFreqReq=Default Dist=Cyclic SrunHost:Pid=node1:32626\n"
)


def test_steps_of_a_job_and_of_an_array_task() -> None:
    """`scontrol -o show step`: the batch step has no srun; a step started by srun names srun's host and pid, which
    is how the batch shell finds its own step."""
    batch, step = parse_steps(SHOW_STEP)
    assert (str(batch.step), batch.state, batch.srun_host, batch.srun_pid) == ("25.batch", "RUNNING", None, None)
    assert (str(step.step), step.step.step, step.srun_host, step.srun_pid) == ("25.0", "0", "node2", 32695)
    _, task = parse_steps(SHOW_STEP_ARRAY_TASK)
    assert (str(task.step), task.step.cancel_target()) == ("23_1.0", "23_1.0")
    assert parse_steps("garbage\nStepId=not-an-id State=RUNNING\n") == []


def test_squeue_exit_code_is_a_raw_wait_status_read_as_exit_code_and_signal() -> None:
    """squeue --Format=exit_code prints the job's raw wait status (src/squeue/print.c): exit 3 is 768, a SIGKILL is 9.
    The sweep status table showed 768 for a point that exited 3 before this was read as wait(2) does."""
    from slurmgen.slurm.array_queue import exit_parts, parse

    assert exit_parts("768") == (3, None)
    assert exit_parts("0") == (0, None)
    assert exit_parts("9") == (0, 9)
    assert exit_parts("3:0") == (3, None) and exit_parts("0:15") == (0, 15)
    assert exit_parts("") == (None, None) and exit_parts("N/A") == (None, None)
    (row,) = parse("12_3|FAILED|NonZeroExitCode|0|768|0:06|\n")
    assert (row.exit_code, row.exit_signal) == (3, None)


@every_version
def test_a_record_gives_its_runs_sluid_where_slurm_prints_it(version: str) -> None:
    """SLUID= comes with `scontrol show job --details` from 26.05 (src/scontrol/info_job.c), after JobName=."""
    text = recorded_text("show-job-o-running.out", version)
    (plain,) = parse_show_job(text)
    assert job_info(plain).sluid is None
    (detailed,) = parse_show_job(re.sub(r"(JobName=[^\n]*?) (UserId=)", r"\1 SLUID=s731M834YGW200 \2", text))
    assert job_info(detailed).sluid == "s731M834YGW200"
    assert job_info(detailed).name == job_info(plain).name
