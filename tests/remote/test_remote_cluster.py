"""From a laptop to the test cluster through a real sshd: the login node runs in the cluster's network namespace
(its first node's, reached over the cluster's bridge, behind a bastion on loopback) with the cluster's Slurm
commands; the job runs the uncommitted change it was submitted with, a requeue after an edit runs the submitted
version, an unchanged second submit sends no file content, and the status of the job comes back in one round
trip."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster
from ssh_server import Sshd, prompts

from remote.cluster_login import client_env, git, logs_of, project, start_login, wait_state

pytestmark = pytest.mark.slurm


def test_submit_from_a_repository_runs_its_uncommitted_change_and_requeue_keeps_it(
    login: Sshd, slurm_cluster: SlurmCluster
) -> None:
    repo = project(login, "proj", "remote-t", "print('committed version')\n", "preemption: false\n",
                   "  control_persist: 60\n")  # fmt: skip
    git(repo, "add", "train.py")
    git(repo, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "one")
    # the first run waits for the requeue below (however slow the machine); the requeued run ends at once
    uncommitted = ("import os, sys, time\nprint('uncommitted version', sys.argv[1:], flush=True)\n"
                   "time.sleep(120 if os.environ.get('SLURM_RESTART_COUNT', '0') == '0' else 1)\n")  # fmt: skip
    (repo / "train.py").write_text(uncommitted)
    work = login.root / "work"
    env = client_env(login)
    # Arguments after `--` travel in the rendered script: through ssh, and into the requeued run as well.
    given = ["--lr", "3e-4", "two words", "$5", "a;id"]
    first = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", "--", *given, cwd=repo, env=env)
    assert first.returncode == 0, first.stderr
    job = first.stdout.strip()
    assert re.search(r"snapshot \w{12} dirty \(\d+ files, [1-9]\d* bytes sent\)", first.stderr), first.stderr
    t = login.transport(env, persist=60)
    # the login node is in the cluster's network: its commands run with the first node's address
    assert login.address in t.run("cat /proc/net/fib_trie").stdout.decode()
    log_dir = f"{work}/runs/remote-t/logs"
    wait_state(t, job, log_dir, {"RUNNING", "COMPLETED"})
    deadline = time.monotonic() + 60
    while "uncommitted version" not in logs_of(log_dir) and time.monotonic() < deadline:
        time.sleep(0.5)  # the first run's program has started: the requeue below interrupts a run of it
    (repo / "train.py").write_text("print('edited after submit')\n")  # the job must not see this
    requeued = run_slurmgen("requeue", job, cwd=repo, env=env)  # through the shared connection
    assert requeued.returncode == 0, requeued.stderr
    assert wait_state(t, job, log_dir, {"COMPLETED", "FAILED"}, timeout=120) == "COMPLETED"
    logs = logs_of(log_dir)
    assert logs.count("uncommitted version") == 2, logs  # both runs ran the submitted code
    assert logs.count(f"uncommitted version {given}") == 2, logs  # with the same arguments
    assert "edited after submit" not in logs
    (repo / "train.py").write_text(uncommitted)
    second = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert second.returncode == 0, second.stderr
    assert "(0 files, 0 bytes sent)" in second.stderr  # unchanged: no file content uploaded
    cancelled = run_slurmgen("cancel", second.stdout.strip(), cwd=repo, env=env)  # its first run would wait 120 s
    assert cancelled.returncode == 0, cancelled.stderr
    journal = (login.root / "journal" / "journal.jsonl").read_text()
    assert f'"job_id":"{job}"' in journal and '"cluster":"alpha"' in journal and '"dirty":true' in journal
    assert '"args":["--lr","3e-4","two words","$5","a;id"]' in journal
    assert login.accepted() == 1  # two slurmgen processes, one login


def test_status_logs_history_cancel_and_resume_take_just_the_id(login: Sshd, slurm_cluster: SlurmCluster) -> None:
    ticks = "import time\nfor i in range(200):\n    print('tick', i, flush=True)\n    time.sleep(0.5)\n"
    repo = project(login, "proj2", "remote-u", ticks)
    work = login.root / "work"
    env = client_env(login)
    submitted = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = run_slurmgen("logs", job, cwd=repo, env=env)
        if "tick 2" in logs.stdout:
            break
        time.sleep(1)
    assert "tick 2" in logs.stdout, logs.stderr
    status = run_slurmgen("status", job, cwd=repo, env=env)
    assert status.returncode == 0, status.stderr
    assert "RUNNING" in status.stdout and "(squeue)" in status.stdout
    assert "cluster alpha; code: snapshot" in status.stderr and "with uncommitted changes" in status.stderr
    follow = subprocess.Popen(
        [sys.executable, "-m", "slurmgen", "logs", "-f", job], cwd=repo, env=env, stdout=subprocess.PIPE, text=True
    )
    time.sleep(3)
    cancel = run_slurmgen("cancel", job, cwd=repo, env=env)
    assert cancel.returncode == 0, cancel.stderr
    out, _ = follow.communicate(timeout=60)  # logs -f ends with the job
    assert "tick" in out
    final = run_slurmgen("status", job, cwd=repo, env=env)
    assert "CANCELLED" in final.stdout, final.stdout + final.stderr
    history = run_slurmgen("history", job, cwd=repo, env=env)  # the run history, copied back over the connection
    assert history.returncode == 0 and "RUN" in history.stdout, history.stderr
    assert re.search(r"^code: snapshot \w{12} \(the repository had no commit yet\) with uncommitted changes$",
                     history.stderr, re.M), history.stderr  # fmt: skip
    # resume, by its id: Slurm still knows the cancelled job, so it is requeued through the connection
    resumed = run_slurmgen("resume", job, cwd=repo, env=env)
    assert resumed.returncode == 0 and f"follow it with: slurmgen status {job}" in resumed.stderr, resumed.stderr
    # the job is back in the queue (wait_state raises if it never comes back)
    wait_state(login.transport(env, persist=600), job, f"{work}/runs/remote-u/logs", {"PENDING", "RUNNING"})
    assert run_slurmgen("cancel", job, cwd=repo, env=env).returncode == 0
    # once Slurm has forgotten a job (MinJobAge; here a journal entry for an id Slurm never had), its script on the
    # cluster is submitted again, to start from its state
    journal = login.root / "journal" / "journal.jsonl"
    line = next(x for x in journal.read_text().splitlines() if f'"job_id":"{job}"' in x)
    with journal.open("a") as ledger:
        ledger.write(line.replace(f'"job_id":"{job}"', '"job_id":"999999"') + "\n")
    again = run_slurmgen("resume", "999999", cwd=repo, env=env)
    assert again.returncode == 0, again.stderr
    new = again.stdout.strip()
    assert new.isdigit() and "Slurm no longer knows job 999999" in again.stderr, again.stderr
    deadline = time.monotonic() + 60
    while "tick" not in run_slurmgen("logs", new, cwd=repo, env=env).stdout and time.monotonic() < deadline:
        time.sleep(1)
    assert "tick" in run_slurmgen("logs", new, cwd=repo, env=env).stdout
    shown = run_slurmgen("status", new, cwd=repo, env=env)
    assert "cluster alpha; code: snapshot" in shown.stderr, shown.stderr  # the same snapshot, by the journal
    assert run_slurmgen("cancel", new, cwd=repo, env=env).returncode == 0
    second = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert second.returncode == 0, second.stderr
    # submit, logs, status, logs -f, cancel, status, history, resume, cancel, resume, logs, status, cancel, submit:
    # one code asked, one login
    assert prompts(login.root) == 1
    assert login.accepted() == 1 and login.jump is not None and login.jump.accepted() == 1
    # The connection drops while `logs -f` follows the second job: one line that names the cluster, never a
    # traceback or a job state; the job goes on, and the next command logs in again (the code asked once more).
    dropped = subprocess.Popen([sys.executable, "-m", "slurmgen", "logs", "-f", second.stdout.strip()], cwd=repo,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert dropped.stdout is not None
    followed = b""
    while b"tick" not in followed and select.select([dropped.stdout], [], [], 90)[0]:  # following it, then the drop
        chunk = os.read(dropped.stdout.fileno(), 4096)
        followed += chunk
        if not chunk:
            break
    assert b"tick" in followed, followed
    drop_connection_after(login, 0).join()
    err = dropped.communicate(timeout=120)[1].decode()
    # (the job may have been pending when `logs -f` began: it said so, then followed)
    lines = [line for line in err.splitlines() if line.strip() and not line.endswith("Waiting for them...")]
    # One line: the drop under a command in flight ("connection dropped"), or the next poll's new login, which a
    # `logs -f` process may not make (BatchMode: "login refused"); then exit 1.
    assert dropped.returncode == 1 and len(lines) == 1, err
    assert re.match(r"error: cluster alpha: (login refused|connection dropped): ", lines[0]), err
    assert f"`ssh {login.alias}`" in lines[0], err
    still = run_slurmgen("status", second.stdout.strip(), cwd=repo, env=env)  # logs in again: the code once more
    assert "RUNNING" in still.stdout, still.stdout + still.stderr  # the job went on
    assert prompts(login.root) == 2
    assert run_slurmgen("cancel", second.stdout.strip(), cwd=repo, env=env).returncode == 0


def test_the_python_api_submits_to_a_cluster_and_its_job_handle_follows_it(
    login: Sshd, slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slurmgen

    repo = project(login, "proj3", "remote-api", "print('from the api')\n")
    for key, value in client_env(login).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(repo)
    job = slurmgen.submit(repo / "job.yaml", cluster="alpha")
    again = slurmgen.Job(str(job.id))
    deadline = time.monotonic() + 90
    while again.state() not in ("COMPLETED", "FAILED") and time.monotonic() < deadline:
        time.sleep(1)
    assert again.state() == "COMPLETED"
    assert "from the api" in again.logs()


@pytest.fixture
def slow_login(slurm_cluster: SlurmCluster) -> Iterator[Sshd]:
    """A login node whose `tar` and `sbatch` take 3 s more (wrappers first on PATH), so that a test can drop the
    connection in the middle of an upload or of a submission: after sbatch submitted, before its reply."""
    slurm_bin = slurm_cluster.env["PATH"].split(":")[0]
    wrappers = Path(tempfile.mkdtemp(prefix="sg-slow-", dir="/tmp"))
    real_sbatch = subprocess.run(["bash", "-c", f"PATH={slurm_bin}:$PATH command -v sbatch"], capture_output=True,
                                 text=True, check=True).stdout.strip()  # fmt: skip
    # the marker says an upload's tar has started: the test drops the connection then, in the middle of it
    (wrappers / "tar").write_text(f'#!/bin/bash\ntouch {wrappers / "uploading"}\nsleep 3\nexec /usr/bin/tar "$@"\n')
    # the marker says sbatch has submitted: the test drops the connection then, before the reply
    (wrappers / "sbatch").write_text(
        f'#!/bin/bash\n{real_sbatch} "$@"; rc=$?\ntouch {server_root_marker(wrappers)}\nsleep 3\nexit $rc\n'
    )
    for name in ("tar", "sbatch"):
        (wrappers / name).chmod(0o755)
    server = start_login(slurm_cluster, path_prepend=str(wrappers))
    yield server
    server.close_master()
    server.remove()
    shutil.rmtree(wrappers, ignore_errors=True)


def server_root_marker(wrappers: Path) -> Path:
    return wrappers / "submitted"


def drop_connection_after(login: Sshd, seconds: float, marker: Path | None = None) -> threading.Thread:
    """End the shared connection (its master) after ``seconds`` (or once ``marker`` exists), as a dropped network
    would."""

    def drop() -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and (marker is None or not marker.exists()):
            time.sleep(0.05)
        login.close_master()

    thread = threading.Thread(target=drop)
    thread.start()
    return thread


def test_a_connection_dropped_mid_upload_or_mid_submit_loses_nothing_and_submits_once(
    slow_login: Sshd, slurm_cluster: SlurmCluster
) -> None:
    repo = project(slow_login, "proj", "remote-drop", "print('once')\n")
    work = slow_login.root / "work"
    env = {k: v for k, v in client_env(slow_login).items() if not k.startswith(("SSH_ASKPASS", "DISPLAY"))}
    # during the first upload's tar (waiting for it: on a loaded machine the submit may take seconds to get there)
    timer = drop_connection_after(slow_login, 120, Path(slow_login.path_prepend.split(":")[0]) / "uploading")
    dropped = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    timer.join()
    assert dropped.returncode != 0
    lines = [line for line in dropped.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cluster alpha: "), dropped.stderr
    snapshots = work / "snapshots"
    assert not snapshots.exists() or [p for p in snapshots.iterdir() if not p.name.startswith(".tmp")] == []
    # the same submit again: the upload completes; the connection drops after sbatch, before its reply
    before = {e.job_id for e in slurm_cluster.client.squeue(all_states=True)}
    marker = Path(slow_login.path_prepend.split(":")[0]) / "submitted"
    timer = drop_connection_after(slow_login, 120, marker)
    again = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env, timeout=180)
    timer.join()
    assert again.returncode == 0, again.stderr
    job = again.stdout.strip()
    assert marker.exists() and "asking again with the same submission token" in again.stderr, again.stderr
    listed = slurm_cluster.client.squeue(all_states=True)
    ours = [e for e in listed if e.job_id not in before and e.name == "remote-drop"]
    assert [str(e.job_id) for e in ours] == [job]  # one job, not two
