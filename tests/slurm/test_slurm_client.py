"""SlurmClient against recorded Slurm answers (tests/data/slurm/<version>/, every test of them once per version)
and real processes: what it sends, what it returns, and which error each Slurm message becomes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm
from recorded import PRIMARY, every_version, recorded_text

from slurmgen.errors import SchedulerError, SchedulerMissing, UsageError
from slurmgen.slurm.client import (
    InvalidJobId,
    JobPending,
    RequeueDisabled,
    SchedulerTimeout,
    SlurmClient,
    clean_submit_env,
)
from slurmgen.slurm.ids import JobId, JobState
from slurmgen.slurm.parse import SQUEUE_FORMAT, Submitted


def Replay(answers: Mapping[tuple[str, ...], str], version: str = PRIMARY) -> FakeSlurm:
    """Each expected argv answered with its recording of that Slurm version; any other argv fails the test."""
    fake = FakeSlurm(version=version)
    for argv, name in answers.items():
        fake.on(*argv, recording=name, exact=True)
    return fake


SHOW = ("scontrol", "--oneliner", "show", "job")


# --- sbatch ----------------------------------------------------------------------------------------------


@every_version
def test_sbatch_submits_in_a_clean_environment(version: str) -> None:
    env = {"PATH": "/usr/bin", "SLURM_CONF": "/c/slurm.conf", "SLURM_CPU_BIND": "cores", "SLURM_JOB_ID": "9",
           "SBATCH_TIMELIMIT": "5", "PMIX_RANK": "0", "SLURMGEN_X": "1"}  # fmt: skip
    run = Replay({("sbatch", "--parsable", "--requeue", "/w/job.sh"): "sbatch-parsable"}, version)
    result = SlurmClient(run, env=env).sbatch(Path("/w/job.sh"), ["--requeue"])
    assert result == Submitted(JobId(3), None)
    assert [call.env for call in run.calls] == [{"PATH": "/usr/bin", "SLURM_CONF": "/c/slurm.conf", "SLURMGEN_X": "1"}]


@every_version
def test_a_client_on_a_cluster_names_it_in_every_command(version: str) -> None:
    """`-M alpha` goes right after the command's name (scontrol reads options only before its subcommand); what the
    commands answer is read as from a site with one cluster."""
    on = "--clusters=alpha"
    argv = ("squeue", on, "--noheader", f"--format={SQUEUE_FORMAT}")
    run = Replay({
        ("sbatch", on, "--parsable", "/w/job.sh"): "handwritten-sbatch-parsable-cluster",
        ("scontrol", on, *SHOW[1:], "7"): "show-job-o-running",
        (*argv, "--jobs=11", "--states=all"): "handwritten-squeue-cluster-header",  # a `CLUSTER: alpha` line first
    }, version)  # fmt: skip
    run.on("scancel", on, "42", exact=True).on("scontrol", on, "requeue", "42", exact=True)  # silent, as they are
    here = SlurmClient(run, env={})
    client = here.on_cluster("alpha")
    assert (here.cluster, client.cluster, client.on_cluster(None) is client) == (None, "alpha", True)
    assert client.sbatch("/w/job.sh") == Submitted(JobId(42), "alpha")
    info = client.show_job(7)
    assert info is not None and info.state == JobState.RUNNING
    rows = client.squeue(["11"], all_states=True)
    assert [str(r.job_id) for r in rows] == ["11_[3-5%2]", "11_2", "11_1"]  # the header is no row
    client.cancel(42)
    client.requeue(42)
    assert all(call.argv[1] == on for call in run.calls) and len(run.calls) == 5


def test_a_cluster_slurm_cannot_resolve_is_one_line() -> None:
    """What sbatch -M says on a site without slurmdbd (measured on the 22.05 test cluster), and where a name is
    not one of `sacctmgr list clusters`: one line naming the cluster and what to check."""
    fake = FakeSlurm().on("sbatch", err=recorded_text("handwritten-sbatch-clusters-no-dbd.err"), rc=1)
    with pytest.raises(SchedulerError) as caught:
        fake.client(env={}).on_cluster("slurmgen").sbatch("/w/job.sh")
    message = str(caught.value)
    assert (
        message.startswith("sbatch: Slurm cannot reach cluster 'slurmgen' named by --clusters") and "\n" not in message
    )
    assert "sacctmgr list clusters" in message and "slurmdbd" in message
    with pytest.raises(UsageError, match="not a Slurm cluster name: '--all'"):
        fake.client().on_cluster("--all")


def test_the_users_choice_of_clusters_reaches_sbatch() -> None:
    """SLURM_CLUSTERS is sbatch's --clusters from the environment (sbatch(1)): the user's, kept like SLURM_CONF."""
    env = {"SLURM_CLUSTERS": "alpha,beta", "SLURM_CLUSTER_NAME": "home", "SLURM_JOB_ID": "9"}
    assert clean_submit_env(env) == {"SLURM_CLUSTERS": "alpha,beta"}


@every_version
def test_sbatch_plain_and_test_only(version: str) -> None:
    run = Replay({("sbatch", "j.sh"): "sbatch-plain", ("sbatch", "--test-only", "j.sh"): "sbatch-test-only"}, version)
    client = SlurmClient(run, env={})
    assert client.sbatch("j.sh", parsable=False).job_id == JobId(4)
    assert client.sbatch("j.sh", parsable=False, test_only=True).nodes == "node1"


@every_version
def test_sbatch_refused(version: str) -> None:
    run = Replay({("sbatch", "--parsable", "j.sh"): "sbatch-error-gres"}, version)
    with pytest.raises(SchedulerError) as err:
        SlurmClient(run, env={}).sbatch("j.sh")
    assert str(err.value) == (
        "sbatch failed (exit 1): Batch job submission failed: Requested node configuration is not available"
    )


def test_missing_binary_is_scheduler_missing(tmp_path: Path) -> None:
    client = SlurmClient(env={"PATH": str(tmp_path)})  # the real subprocess.run, on a PATH without Slurm
    with pytest.raises(SchedulerMissing, match=r"^sbatch: command not found"):
        client.sbatch(tmp_path / "job.sh")
    with pytest.raises(SchedulerMissing, match=r"^scontrol: command not found"):
        client.show_job(5)


def test_a_hung_command_times_out(tmp_path: Path) -> None:
    fake = tmp_path / "sbatch"
    fake.write_text("#!/bin/sh\nexec /bin/sleep 5\n")
    fake.chmod(0o755)
    client = SlurmClient(env={"PATH": str(tmp_path)}, timeout=0.2)
    with pytest.raises(SchedulerTimeout, match=r"no answer from Slurm within 0\.2 s\. The job may or may not"):
        client.sbatch("job.sh")


@every_version
def test_sbatch_argv_is_what_sbatch_runs(version: str) -> None:
    argv = SlurmClient.sbatch_argv("/w/j.sh", ["--comment=x y"], test_only=True)
    assert argv == ["sbatch", "--parsable", "--test-only", "--comment=x y", "/w/j.sh"]
    run = Replay({tuple(argv): "sbatch-test-only-too-large"}, version)
    with pytest.raises(SchedulerError, match="Requested node configuration is not available"):
        SlurmClient(run, env={}).sbatch("/w/j.sh", ["--comment=x y"], test_only=True)


@every_version
def test_comments(version: str) -> None:
    argv = ("squeue", "--me", "--noheader", "--states=all", "--format=%i\x1f%k")
    run = Replay({(*argv, "--name=train"): "squeue-comments", argv: "squeue-comments"}, version)
    rows = SlurmClient(run).comments("train")
    assert (JobId(21), "my run slurmgen:20261121-081500-a1b2c3") in rows and len(rows) == 4
    assert SlurmClient(run).comments() == rows


# --- looking at jobs -------------------------------------------------------------------------------------


@every_version
def test_show_job(version: str) -> None:
    run = Replay({(*SHOW, "7"): "show-job-o-running", (*SHOW, "99999"): "show-job-invalid"}, version)
    client = SlurmClient(run)
    info = client.show_job("7")
    assert info is not None
    assert (info.state, info.nodes, info.fields["Command"]) == (
        JobState.RUNNING, "node[2-3]", "/tmp/slurmgen-record/dir with space/my job.sh"
    )  # fmt: skip
    assert client.show_job(99999) is None  # "Invalid job id specified" (e.g. purged after MinJobAge)
    assert client.show_jobs(99999) == []


def test_a_gone_array_task_is_unknown_on_either_stream() -> None:
    """`Job 11_7 not found` (exit 1) on stdout up to 25.11 and on stderr from 26.05 (the handwritten-show-job-task-
    gone-* files): Slurm does not know that job, as for "Invalid job id specified"."""
    out = recorded_text("handwritten-show-job-task-gone-25.11.out")
    err = recorded_text("handwritten-show-job-task-gone-26.05.err")
    for run in (FakeSlurm().on(*SHOW, "11_7", rc=1, out=out), FakeSlurm().on(*SHOW, "11_7", rc=1, err=err)):
        assert SlurmClient(run).show_job("11_7") is None
        assert SlurmClient(run).show_jobs("11_7") == []
    other = FakeSlurm().on(*SHOW, "11_7", rc=1, err="Partition x not found\n")
    with pytest.raises(SchedulerError, match="Partition x not found") as raised:
        SlurmClient(other).show_job("11_7")
    assert not isinstance(raised.value, InvalidJobId)


@every_version
def test_show_job_of_an_array(version: str) -> None:
    run = Replay({(*SHOW, "11"): "show-job-o-array", (*SHOW, "11_2"): "show-job-o-array-task"}, version)
    client = SlurmClient(run)
    whole = client.show_job(11)
    assert whole is not None and str(whole.job_id) == "11_[3-5%2]"  # the record that carries id 11
    assert [str(i.job_id) for i in client.show_jobs(11)] == ["11_[3-5%2]", "11_2", "11_1"]
    task = client.show_job(JobId(11, array_task=2, step="batch"))  # the step is dropped for scontrol
    assert task is not None and (task.raw_id, task.batch_host) == (13, "node3")


@every_version
def test_squeue(version: str) -> None:
    argv = ("squeue", "--noheader", f"--format={SQUEUE_FORMAT}")
    run = Replay({
        (*argv, "--jobs=11", "--states=all"): "squeue-array-job",
        (*argv, "--jobs=99999"): "show-job-invalid",  # squeue says what scontrol says for an unknown id
    }, version)  # fmt: skip
    client = SlurmClient(run)
    rows = client.squeue(["11"], all_states=True)
    assert [(str(r.job_id), r.state) for r in rows] == [
        ("11_[3-5%2]", JobState.PENDING), ("11_2", JobState.RUNNING), ("11_1", JobState.RUNNING)
    ]  # fmt: skip
    assert client.squeue([99999]) == []


@every_version
def test_show_hostnames(version: str) -> None:
    run = Replay({
        ("scontrol", "show", "hostnames", "node[1-3],gpu-[01-02]"): "hostnames",
        ("scontrol", "show", "hostnames", "node[1-2]-ib"): "hostnames-invalid",
    }, version)  # fmt: skip
    client = SlurmClient(run)
    assert client.show_hostnames("node[1-3],gpu-[01-02]") == ["node1", "node2", "node3", "gpu-01", "gpu-02"]
    if version < "23.11":
        # scontrol exits 0 here; only stderr tells (src/scontrol/info_job.c scontrol_print_hosts returns void)
        with pytest.raises(SchedulerError, match="Invalid hostlist: node\\[1-2\\]-ib"):
            client.show_hostnames("node[1-2]-ib")
    else:  # a suffix after the brackets is valid from 23.11 on
        assert client.show_hostnames("node[1-2]-ib") == ["node1-ib", "node2-ib"]
    for bad in ["", "  ", "-h", "a b"]:  # empty would make scontrol read SLURM_NODELIST instead
        with pytest.raises(UsageError):
            client.show_hostnames(bad)


# --- the site's configuration (slurmgen doctor) -----------------------------------------------------------


def test_show_config_and_partitions() -> None:
    run = Replay({
        ("scontrol", "show", "config"): "show-config",
        ("scontrol", "-o", "show", "partition"): "show-partition-o",
        ("scontrol", "-o", "show", "partition", "nope"): "show-partition-o-unknown",
    })  # fmt: skip
    client = SlurmClient(run)
    assert "SLURM_VERSION           = 22.05.8" in client.show_config()
    assert client.show_partitions().startswith("PartitionName=debug ")
    # Slurm prints this on stdout, with exit 1
    with pytest.raises(SchedulerError, match=r"^scontrol show partition failed \(exit 1\): Partition nope not found$"):
        client.show_partitions("nope")
    for bad in ["", "-a", "a b", "a,b"]:
        with pytest.raises(UsageError):
            client.show_partitions(bad)


def test_a_client_without_a_controller_is_no_slurm_here(tmp_path: Path) -> None:
    run = FakeSlurm().on("scontrol", recording="show-config-no-controller")  # any scontrol says the same
    for ask in (SlurmClient(run).show_config, SlurmClient(run).show_partitions, lambda: SlurmClient(run).show_job(5)):
        with pytest.raises(SchedulerMissing, match="no Slurm controller reachable from here"):
            ask()
    with pytest.raises(SchedulerMissing, match=r"^scontrol: command not found"):
        SlurmClient(env={"PATH": str(tmp_path)}).show_config()


# --- requeue, release, cancel ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "recording", "error", "message"),
    [
        (
            10,
            "requeue-disabled",
            RequeueDisabled,
            "job 10 cannot be requeued: it was submitted with --no-requeue",
        ),
        (9, "requeue-pending", JobPending, "job 9 is pending already"),
        (17, "requeue-again", JobPending, "job 17 is pending already"),
        (99999, "requeue-invalid", InvalidJobId, "Slurm does not know job 99999"),
    ],
)
@every_version
def test_requeue_errors(job: int, recording: str, error: type[SchedulerError], message: str, version: str) -> None:
    run = Replay({("scontrol", "requeue", str(job)): recording}, version)
    with pytest.raises(error, match=message) as err:
        SlurmClient(run).requeue(job)
    assert isinstance(err.value, SchedulerError) and err.value.exit_code == 3


@every_version
def test_requeue_forms(version: str) -> None:
    run = Replay({
        ("scontrol", "requeue", "17"): "requeue-running",
        ("scontrol", "requeue", "Incomplete", "9"): "requeue-incomplete-pending",
        ("scontrol", "requeuehold", "18"): "requeuehold-running",
        ("scontrol", "release", "18"): "release-held",
        ("scontrol", "release", "99999"): "release-invalid",
    }, version)  # fmt: skip
    client = SlurmClient(run)
    client.requeue(17)
    client.requeue("9", incomplete=True)  # a no-op success on a pending job
    client.requeue(18, hold=True)
    client.release(18)
    with pytest.raises(InvalidJobId):
        client.release(99999)


@every_version
def test_requeue_names_one_array_task_never_the_whole_array(version: str) -> None:
    run = Replay({("scontrol", "requeue", "11_2"): "requeue-running"}, version)
    SlurmClient(run).requeue("11_2.batch")
    with pytest.raises(UsageError, match="range of pending array tasks"):
        SlurmClient(run).requeue("11_[3-5%2]")
    with pytest.raises(UsageError, match="not a Slurm job id"):
        SlurmClient(run).requeue("11; scancel -u root")


@every_version
def test_cancel(version: str) -> None:
    run = Replay({
        ("scancel", "99999"): "scancel-invalid",  # 22.05 says nothing and exits 0 for an unknown id
        ("scancel", "--signal=USR1", "99999"): "scancel-signal-invalid",
        ("scancel", "8"): "scancel-pending",
    }, version)  # fmt: skip
    client = SlurmClient(run)
    client.cancel(8)
    client.cancel(99999)
    with pytest.raises(InvalidJobId):
        client.cancel(99999, signal="USR1")
    with pytest.raises(UsageError, match="exclude each other"):
        client.cancel(8, signal="USR1", batch=True, full=True)
    with pytest.raises(UsageError, match="not a signal"):
        client.cancel(8, signal="USR1 --full")


# --- environment, layering -------------------------------------------------------------------------------


def test_clean_submit_env() -> None:
    env = {"SLURM_CONF": "/c", "SLURM_JOB_ID": "1", "SLURM_CPU_BIND": "x", "SBATCH_SIGNAL": "USR1@60",
           "SBATCH_EXPORT": "NONE", "PMIX_RANK": "3", "SALLOC_PARTITION": "p", "SRUN_CPUS_PER_TASK": "2",
           "HOME": "/root", "MY_SLURM_THING": "kept", "SLURMGEN_STATE_DIR": "/s"}  # fmt: skip
    assert clean_submit_env(env) == {"SLURM_CONF": "/c", "HOME": "/root", "MY_SLURM_THING": "kept",
                                     "SLURMGEN_STATE_DIR": "/s"}  # fmt: skip
    assert clean_submit_env(env, keep=["SBATCH_EXPORT"])["SBATCH_EXPORT"] == "NONE"
    assert env["SLURM_JOB_ID"] == "1"  # the input is not changed


def test_slurm_module_imports_no_cli_dependency() -> None:
    code = (
        "import sys, slurmgen.slurm; "
        "heavy = {'typer', 'jinja2', 'yaml', 'torch', 'click'}; "
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
