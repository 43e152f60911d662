"""`slurmgen submit/requeue/status/logs/cancel` on the real 3-node test cluster: jobs run through the rendered
script and slurmgen's runtime entry point, and the tests assert on what Slurm and the log files say."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cli_run import run_slurmgen, slurmgen_argv

from slurmgen.progress_mark import node_dir_name
from slurmgen.slurm.ids import JobState
from slurmgen.slurm.showjob import JobInfo

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm

PROGRAM = Path(__file__).parents[1] / "task_program.py"
# The commands must serve every Slurm a user may have, not only the newest: these tests run on each selected version.
EVERY_VERSION = pytest.mark.slurm_versions()
LONG = 300.0  # seconds: the cluster is shared, so a job may pend a while; never a fixed sleep as an assertion


def spec(tmp_path: Path, mode: list[str], nodes: int = 2, tasks: int = 2, extra: str = "") -> Path:
    command = json.dumps([sys.executable, str(PROGRAM), *mode])
    path = tmp_path / "job.yaml"
    path.write_text(
        f'name: sgtest\ncommand: {command}\ntime: "00:10:00"\nnodes: {nodes}\ntasks_per_node: {tasks}\n'
        f"python: {sys.executable}\npreemption: false\noutput: logs\n{extra}"
    )
    return path


def slurmgen(cluster: SlurmCluster, cwd: Path, *args: str, timeout: float = LONG) -> subprocess.CompletedProcess[str]:
    return run_slurmgen(*args, cwd=cwd, env=cluster.env, timeout=timeout)


def submit(cluster: SlurmCluster, cwd: Path, *args: str) -> str:
    result = slurmgen(cluster, cwd, "submit", "job.yaml", *args)
    assert result.returncode == 0, result.stderr
    job = result.stdout.strip()
    assert job.isdigit(), result.stdout  # the id alone on stdout: JOB=$(slurmgen submit ...)
    return job


def wait_until(what: str, check: Callable[[], bool], timeout: float = LONG) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.1)


def text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def node_logs(cwd: Path, job: str) -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted((cwd / "logs" / f"sgtest-{job}").glob("*.log"))}


def fields(line: str) -> dict[str, str]:
    """`task RANK=0 LOCAL_RANK=0 ... host=node1` as a dict."""
    return dict(word.split("=", 1) for word in line.split()[1:])


def ended(info: JobInfo) -> bool:
    return info.state.is_terminal


@EVERY_VERSION
def test_two_nodes_two_tasks_with_wait(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["ranks"])
    result = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--wait")
    assert result.returncode == 0, result.stderr
    job, last = result.stdout.splitlines()  # the id first, the machine-readable result last
    assert job.isdigit() and f"slurmgen: job {job} COMPLETED" in result.stderr
    assert last == f"job={job} state=COMPLETED exit=0"
    info = slurm_cluster.wait_for(job, ended)
    assert (info.state, info.exit_code) == (JobState.COMPLETED, 0)
    hosts = slurm_cluster.client.show_hostnames(info.nodes or "")
    logs = node_logs(tmp_path, job)
    assert sorted(logs) == sorted([*hosts, "rank-0", "rank-1", "rank-2", "rank-3"]) and len(hosts) == 2
    everything = [fields(ln) for log in logs.values() for ln in log.splitlines() if ln.startswith("task ")]
    ports = set()
    for node_index, host in enumerate(hosts):
        tasks = sorted((t for t in everything if t["host"] == host), key=lambda t: t["RANK"])
        ports |= {t.pop("MASTER_PORT") for t in tasks}
        assert tasks == [
            {"RANK": str(2 * node_index + local), "LOCAL_RANK": str(local), "WORLD_SIZE": "4",
             "MASTER_ADDR": hosts[0], "SLURM_RESTART_COUNT": "-", "host": host}
            for local in (0, 1)
        ], everything  # fmt: skip
    assert len(ports) == 1 and ports.pop().isdigit()  # one rendezvous for all ranks
    # each node's own directory went with the step, also where a task of a second ended before its sibling's
    # supervisor began (task/watchdog.leave_node); the nodes' /dev/shm is this machine's
    log_dir = str(tmp_path / "logs" / f"sgtest-{job}")
    assert [d for d in (node_dir_name(log_dir, h) for h in hosts) if os.path.exists(d)] == []
    # the run directory and the journal
    journal = [json.loads(line) for line in (tmp_path / ".slurmgen" / "journal.jsonl").read_text().splitlines()]
    assert [(e["event"], e["job_id"]) for e in journal] == [("submitting", None), ("submitted", job)]
    run_dir = Path(journal[-1]["run_dir"])
    assert (run_dir / "job.sbatch").read_text().startswith("#!/bin/bash")
    assert slurm_cluster.job_info(job)["Comment"] == f"slurmgen:{journal[-1]['token']}"
    status = slurmgen(slurm_cluster, tmp_path, "status", "job.yaml")
    assert status.returncode == 0 and status.stdout.splitlines()[1].split()[:3] == [job, "sgtest", "COMPLETED"]


def test_a_lead_time_cut_to_the_short_limit_is_one_note_and_the_job_runs(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Preemption on, a 10-minute limit and no lead_time: submit says the 150 s it chose, once, and the job asks
    Slurm for that signal and completes."""
    path = spec(tmp_path, ["ranks"], nodes=1, tasks=1)
    path.write_text(path.read_text().replace("preemption: false\n", ""))
    result = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--wait")
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "preemption.lead_time" in line]
    assert said == [
        "note: job.yaml:3: preemption.lead_time: not given, so 150 s, a quarter of the 00:10:00 limit: the default "
        "300 s is for limits of 00:20:00 or more, and would take too much of a shorter job; give lead_time to choose"
    ], result.stderr
    job = result.stdout.splitlines()[0]
    journal = [json.loads(line) for line in (tmp_path / ".slurmgen" / "journal.jsonl").read_text().splitlines()]
    assert "#SBATCH --signal='B:USR1@150'" in (Path(journal[-1]["run_dir"]) / "job.sbatch").read_text()
    assert slurm_cluster.wait_for(job, ended).state == JobState.COMPLETED


@EVERY_VERSION
def test_wait_exits_with_the_jobs_exit_status(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["exit", "3"], nodes=1, tasks=1)
    result = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--wait")
    assert result.returncode == 3, result.stderr
    assert "FAILED with exit code 3" in result.stderr


@EVERY_VERSION
def test_requeue_brings_a_running_job_back_and_keeps_the_earlier_log(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    spec(tmp_path, ["requeue-me"], nodes=2, tasks=1)
    job = submit(slurm_cluster, tmp_path)
    wait_until("both ranks of run 1 printed", lambda: "\n".join(node_logs(tmp_path, job).values()).count("task ") == 2)
    result = slurmgen(slurm_cluster, tmp_path, "requeue", job)
    assert result.returncode == 0, result.stderr
    assert f"requeueing {job}: job {job} is RUNNING" in result.stderr and "SLURM_RESTART_COUNT=1" in result.stderr
    info = slurm_cluster.wait_for(job, ended, timeout=LONG)
    assert (info.state, info.exit_code, info.restarts) == (JobState.COMPLETED, 0, 1)
    lines = [line for log in node_logs(tmp_path, job).values() for line in log.splitlines() if line.startswith("task")]
    assert sorted(line.split("SLURM_RESTART_COUNT=")[1].split()[0] for line in lines) == ["-", "-", "1", "1"]
    batch = text(tmp_path / "logs" / f"sgtest-{job}.log")
    assert f"slurmgen: job {job}, run 1," in batch and f"slurmgen: job {job}, run 2," in batch
    shown = slurmgen(slurm_cluster, tmp_path, "logs", job)
    assert shown.returncode == 0 and shown.stdout.count("SLURM_RESTART_COUNT=-") == 2
    assert f"==> logs/sgtest-{job}.log <==" in shown.stdout
    again = slurmgen(slurm_cluster, tmp_path, "requeue", job)  # finished now: not without --finished
    assert again.returncode == 2 and "already ended (COMPLETED" in again.stderr


@EVERY_VERSION
def test_requeue_hold_leaves_the_job_held(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["requeue-me"], nodes=1, tasks=1)
    job = submit(slurm_cluster, tmp_path)
    try:
        slurm_cluster.wait_for(job, "RUNNING", timeout=LONG)
        result = slurmgen(slurm_cluster, tmp_path, "requeue", "--hold", "sgtest")  # by job name, from the journal
        assert result.returncode == 0, result.stderr
        info = slurm_cluster.wait_for(job, JobState.HELD, timeout=60)
        assert (info.reason, info.restarts) == ("job_requeued_in_held_state", 1)
        status = slurmgen(slurm_cluster, tmp_path, "status", job)
        assert status.stdout.splitlines()[1].split()[2:4] == ["HELD", "job_requeued_in_held_state"]
        pending = slurmgen(slurm_cluster, tmp_path, "requeue", job)
        assert pending.returncode == 3 and "not running, so there is nothing to requeue" in pending.stderr
        # scancel --signal would retry a pending job for ~95 s; slurmgen says at once why nothing can receive it.
        signal = slurmgen(slurm_cluster, tmp_path, "cancel", job, "--signal", "USR2")
        assert signal.returncode == 3 and f"job {job} is PENDING: no task runs to receive SIGUSR2" in signal.stderr
    finally:
        slurm_cluster.client.cancel(job)


@EVERY_VERSION
def test_requeue_one_array_task_leaves_the_other_running(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["requeue-me"], nodes=1, tasks=1, extra='array: "0-1"\n')
    job = submit(slurm_cluster, tmp_path)
    first, second = f"{job}_0", f"{job}_1"
    try:

        def printed(task: str) -> Callable[[], bool]:
            return lambda: "task " in "".join(node_logs(tmp_path, task).values())

        for task in (first, second):
            wait_until(f"run 1 of {task} printed", printed(task))
        result = slurmgen(slurm_cluster, tmp_path, "requeue", second)
        assert result.returncode == 0, result.stderr
        info = slurm_cluster.wait_for(second, ended, timeout=LONG)
        assert (info.state, info.exit_code, info.restarts) == (JobState.COMPLETED, 0, 1)
        assert slurm_cluster.wait_for(first, "RUNNING").restarts == 0  # its sibling was not touched
        status = slurmgen(slurm_cluster, tmp_path, "status", second)
        assert status.returncode == 0 and status.stdout.splitlines()[1].split()[:1] == [second], status.stdout
        assert "COMPLETED" in status.stdout.splitlines()[1]
        shown = slurmgen(slurm_cluster, tmp_path, "logs", second)
        assert shown.returncode == 0 and shown.stdout.count("SLURM_RESTART_COUNT=1") == 1, shown.stdout
    finally:
        slurm_cluster.client.cancel(job)


@EVERY_VERSION
@pytest.mark.parametrize("route", ["default", "steps"])
def test_cancel_signal_reaches_the_tasks(slurm_cluster: SlurmCluster, tmp_path: Path, route: str) -> None:
    spec(tmp_path, ["wait-signal", "USR2"], nodes=2, tasks=1)
    job = submit(slurm_cluster, tmp_path)
    try:
        wait_until("both ranks ready", lambda: "\n".join(node_logs(tmp_path, job).values()).count(" ready") == 2)
        to = [] if route == "default" else ["--to", route]
        result = slurmgen(slurm_cluster, tmp_path, "cancel", job, "--signal", "USR2", *to)
        assert result.returncode == 0, result.stderr
        assert ("(batch:" if route == "default" else "(steps:") in result.stderr
        info = slurm_cluster.wait_for(job, ended, timeout=LONG)
        logs = "\n".join(node_logs(tmp_path, job).values())
        assert logs.count("got SIGUSR2") == 2, logs
        assert (info.state, info.exit_code) == (JobState.COMPLETED, 0)  # a clean exit, not a kill
    finally:
        slurm_cluster.client.cancel(job)


@EVERY_VERSION
def test_logs_follow_prints_as_the_job_writes_and_stops_at_its_end(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["slow", "10"], nodes=2, tasks=1)
    job = submit(slurm_cluster, tmp_path)
    follow = slurmgen(slurm_cluster, tmp_path, "logs", "-f", job)  # returns by itself once the job is over
    assert follow.returncode == 0, follow.stderr
    assert slurm_cluster.wait_for(job, ended, timeout=5).state is JobState.COMPLETED
    for rank in (0, 1):
        assert [ln for ln in follow.stdout.splitlines() if ln.startswith(f"rank {rank} ")] == [
            f"rank {rank} line {i}" for i in range(10)
        ]
    assert "slurmgen: step ended with exit code 0" in follow.stdout  # the batch log, to its last line
    one = slurmgen(slurm_cluster, tmp_path, "logs", job, "--rank", "1")  # what rank 1 printed, and nothing else
    assert [ln for ln in one.stdout.splitlines() if "line" in ln] == [f"rank 1 line {i}" for i in range(10)]


def ctrl_c_as_at_a_terminal() -> None:
    """SIGINT back to its default in the child, so Python raises KeyboardInterrupt on it as at a terminal, even
    when this suite itself runs in the background (bash starts `&` jobs with SIGINT ignored, and Python keeps an
    ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_logs_follow_stops_cleanly_on_ctrl_c(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["requeue-me"], nodes=1, tasks=1)
    job = submit(slurm_cluster, tmp_path)
    try:
        printed = tmp_path / "follow.out"
        with printed.open("w") as out:
            follow = subprocess.Popen(
                slurmgen_argv("logs", "-f", job),
                cwd=tmp_path, env=slurm_cluster.env, stdout=out, stderr=subprocess.PIPE, text=True,
                preexec_fn=ctrl_c_as_at_a_terminal,
            )  # fmt: skip
            wait_until("the follower printed run 1", lambda: "task RANK=0" in printed.read_text())
            follow.send_signal(signal.SIGINT)
            _, err = follow.communicate(timeout=30)
        assert follow.returncode == 130 and "Traceback" not in err  # Typer turns Ctrl-C into a quiet exit 130
    finally:
        slurm_cluster.client.cancel(job)


@EVERY_VERSION
def test_test_only_asks_the_scheduler(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["ranks"])
    fits = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--test-only")
    assert fits.returncode == 0 and fits.stdout.startswith("job sgtest can run: it would start at "), fits.stderr
    too_large = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--test-only", "--set", "nodes=4")
    assert too_large.returncode == 3 and too_large.stdout == ""
    assert "cannot run on this cluster" in too_large.stderr
    assert "Requested node configuration is not available" in too_large.stderr
    assert not (tmp_path / ".slurmgen").exists() and not (tmp_path / "logs").exists()


# What real scripts say that the spec says since `srun:`, `error:` and an optional `time`: every Slurm must take it.
REAL_SCRIPT = "srun: {label: true, cpu-bind: none, kill-on-bad-exit: false}\nerror: errs\n"


def untimed(path: Path) -> None:
    path.write_text("\n".join(line for line in path.read_text().splitlines() if not line.startswith("time:")) + "\n")


@EVERY_VERSION
def test_test_only_takes_srun_options_error_and_no_time(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """The rendered script with `srun:` options, `error:`, `steps` and no `time` passes `sbatch --test-only`, and
    submit says the limit the partition gives the job (the test clusters' partitions have neither DefaultTime nor
    MaxTime)."""
    untimed(spec(tmp_path, ["ranks"], extra=REAL_SCRIPT + "steps: 3\n"))
    script = slurmgen(slurm_cluster, tmp_path, "render", "job.yaml")
    assert script.returncode == 0, script.stderr
    assert "#SBATCH --time" not in script.stdout and "#SBATCH --error=" in script.stdout
    assert "'--kill-on-bad-exit=0'" in script.stdout and "'--cpu-bind=none'" in script.stdout
    fits = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--test-only")
    assert fits.returncode == 0 and fits.stdout.startswith("job sgtest can run: it would start at "), fits.stderr
    assert "note: time left out: partition debug has neither DefaultTime nor MaxTime" in fits.stderr, fits.stderr
    assert not (tmp_path / ".slurmgen").exists() and not (tmp_path / "logs").exists()


@EVERY_VERSION
def test_with_kill_on_bad_exit_off_the_other_ranks_finish_and_the_job_exits_with_the_failed_ranks_code(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """srun: {kill-on-bad-exit: false} on real Slurm: rank 1 exits 3 at once; ranks 0, 2 and 3 finish after it
    (srun waits for them, slurmstepd does not end the step); the job exits 3 and its batch log names rank 1. The
    batch shell's stderr goes to `error:`, apart from its stdout."""
    flag = tmp_path / "failed"
    untimed(spec(tmp_path, ["fail-alone", "1", "3", str(flag)], extra=REAL_SCRIPT))
    done = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--wait")
    job = done.stdout.split()[0]
    assert done.returncode == 3, done.stdout + done.stderr
    logs = node_logs(tmp_path, job)
    for rank in range(4):  # every start of the step (recovery's default restart starts it once more)
        log = logs[f"rank-{rank}"]
        started, finished = log.count(f"STARTED rank={rank}"), log.count(f"FINISHED rank={rank}")
        assert started >= 1 and finished == (0 if rank == 1 else started), logs
    errs = list((tmp_path / "errs").glob(f"sgtest-{job}.err"))
    assert len(errs) == 1, sorted((tmp_path / "errs").iterdir()) if (tmp_path / "errs").exists() else "no errs"
    err = errs[0].read_text()
    assert "rank 1 on node" in err and "failed first: its program exited with code 3; the other tasks ran on" in err
    assert "Terminated" not in err, err


@EVERY_VERSION
def test_three_steps_run_in_one_allocation(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """steps: 3 on real Slurm: the command runs three times in the job's one run (SLURMGEN_STEP_INDEX 0, 1, 2), one
    srun step each, and `slurmgen history` shows the three steps done."""
    record = tmp_path / "steps.txt"
    spec(tmp_path, ["steps", str(record)], nodes=1, extra="steps: 3\n")
    done = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    job = done.stdout.split()[0]
    assert record.read_text().splitlines() == ["0 0", "1 0", "2 0"]
    shown = slurmgen(slurm_cluster, tmp_path, "history", job)
    assert shown.returncode == 0 and "steps 1, 2, 3 of 3 done" in shown.stdout, shown.stdout + shown.stderr


def test_unwritable_log_path_fails_before_sbatch(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec(tmp_path, ["ranks"])
    (tmp_path / "afile").write_text("a regular file: nothing can be created under it, not even by root")
    result = slurmgen(slurm_cluster, tmp_path, "submit", "job.yaml", "--set", f"output={tmp_path}/afile/logs")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: job.yaml: output: cannot write to ") and result.stderr.count("\n") == 1
    assert not (tmp_path / ".slurmgen").exists()  # no run directory, no journal entry: sbatch never ran


LOST_REPLY = """#!/bin/bash
# sbatch whose reply is lost: the real one submits (or, with NOSUBMIT set, does not), then it hangs.
[ -n "${NOSUBMIT:-}" ] || "$REAL_SBATCH" "$@" > /dev/null || exit 1
exec sleep 60
"""


@pytest.mark.parametrize("submits", [True, False])
def test_an_sbatch_timeout_is_settled_by_the_token_never_by_a_second_sbatch(
    slurm_cluster: SlurmCluster, tmp_path: Path, submits: bool
) -> None:
    from slurmgen.backends.slurm_here.sbatch import send_job as do_submit
    from slurmgen.journal import Journal, new_token
    from slurmgen.script.render import render
    from slurmgen.slurm.client import SchedulerTimeout, SlurmClient
    from slurmgen.spec.load import load_file
    from slurmgen.submission.plan import plan

    wrapper = tmp_path / "bin" / "sbatch"
    wrapper.parent.mkdir()
    wrapper.write_text(LOST_REPLY)
    wrapper.chmod(0o755)
    real = shutil.which("sbatch", path=slurm_cluster.env["PATH"])  # the cluster version's own sbatch
    assert real is not None
    env = {**slurm_cluster.env, "PATH": f"{wrapper.parent}:{slurm_cluster.env['PATH']}", "REAL_SBATCH": real}
    if not submits:
        env["NOSUBMIT"] = "1"
    loaded = load_file(spec(tmp_path, ["ranks"], nodes=1, tasks=1, extra="sbatch: {hold: true}\n"))
    token = new_token()  # unique: Slurm still lists earlier runs' jobs (MinJobAge)
    p = plan(tmp_path / "job.yaml", loaded.spec, render(loaded.spec), tmp_path / ".slurmgen", tmp_path, token)
    journal = Journal(tmp_path / ".slurmgen")
    client = SlurmClient(env=env, timeout=3)
    if submits:
        result = do_submit(p, client, journal, which=lambda name: str(wrapper), sleep=time.sleep)
        try:
            assert result.recovered and slurm_cluster.job_info(result.job_id)["Comment"] == f"slurmgen:{token}"
            assert [(e.event, e.job_id) for e in journal.entries()] == [
                ("submitting", None),
                ("submitted", str(result.job_id)),
            ]
        finally:
            slurm_cluster.client.cancel(result.job_id)
    else:
        with pytest.raises(SchedulerTimeout, match="probably not submitted"):
            do_submit(p, client, journal, which=lambda name: str(wrapper), sleep=lambda s: None)
        assert [e.event for e in journal.entries()] == ["submitting", "unknown"]
    mine = [job for job, comment in slurm_cluster.client.comments("sgtest") if comment.endswith(f"slurmgen:{token}")]
    assert len(mine) == (1 if submits else 0)  # exactly one job, or none: never a blind second submission
