"""The second factor expires: the shared connection to the cluster has ended (ControlPersist, ssh_config(5)) and a
process that cannot answer the one-time code (no terminal, no SSH_ASKPASS: a notebook, cron) asks a job's
status. It gets one line naming the cluster, ssh's own words and what to do, never a job state: a job whose
cluster could not be asked is not a job that Slurm forgot (MinJobAge), and the journal keeps its record as it
was. With the code available again, the next command logs in once and shows the job's real state."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import run_slurmgen, slurmgen_argv
from conftest import SlurmCluster
from ssh_server import Sshd, prompts

from remote.cluster_login import client_env, project

pytestmark = pytest.mark.slurm

# what a job's state would look like, were the expired login taken for an answer about the job ("the shared
# connection is gone" is about the connection)
STATES = re.compile(r"\b(COMPLETED|FAILED|UNKNOWN|PENDING|RUNNING|CANCELLED)\b|forg[eo]t|MinJobAge|lost", re.I)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def no_code(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` as a notebook or cron runs it: no SSH_ASKPASS, stdin from /dev/null, and a new session, so no
    controlling terminal either (ssh(1) then cannot read a passphrase or code from /dev/tty)."""
    bare = {k: v for k, v in env.items() if not k.startswith(("SSH_ASKPASS", "DISPLAY"))}
    return subprocess.run(argv, cwd=cwd, env=bare, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          start_new_session=True, timeout=60, check=False)  # fmt: skip


def test_an_expired_second_factor_is_one_line_naming_the_cluster_never_a_job_state(
    login: Sshd, slurm_cluster: SlurmCluster
) -> None:
    # ControlPersist 10 s: long enough that the two commands run after the new login (`status JOB`, then `status`)
    # share its connection even on a loaded machine (with 2 s, CI's second one found it gone and logged in again
    # within the same TOTP step, which pam_oath refuses); short enough to wait for its end.
    repo = project(login, "proj", "remote-exp", "print('done')\n", "preemption: false\n",
                   "  control_persist: 10\n")  # fmt: skip
    env = client_env(login)
    submitted = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert prompts(login.root) == 1
    code_step = int(time.time() // 30)  # the 30 s TOTP step whose code the submit's login used (RFC 6238)
    # the job's end, seen on the cluster itself (not through the connection, which must be left to expire)
    deadline = time.monotonic() + 60
    state = ""
    while state != "COMPLETED" and time.monotonic() < deadline:
        state = next((e.state_name for e in slurm_cluster.client.squeue(all_states=True) if str(e.job_id) == job), "")
        time.sleep(0.5)
    assert state == "COMPLETED"
    # the master ends ControlPersist seconds after its last use and removes its socket; watched on the directory,
    # since each `ssh -O check` talks to the master (seen here: checks every 0.3 s kept a 10 s master alive)
    deadline = time.monotonic() + 40
    while any((login.root / "c").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any((login.root / "c").iterdir()) and not login.transport(env).alive()
    journal = login.root / "journal"
    before = files(journal)
    for argv in (slurmgen_argv("status", job), slurmgen_argv("status")):
        done = no_code(argv, repo, env)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode != 0 and len(lines) == 1, (argv, done.stdout, done.stderr)
        line = lines[0]
        assert line.startswith("error: cluster alpha: login refused: ssh says "), line
        assert "Permission denied" in line and f"`ssh {login.alias}`" in line, line  # ssh's words; what to do
        assert done.stdout == "" and not STATES.search(line), (argv, done.stdout, line)  # no row, no state
    api = "import slurmgen, sys\ntry:\n    slurmgen.Job(sys.argv[1]).state()\nexcept slurmgen.SlurmgenError as e:\n"
    api += "    print(type(e).__name__, e)\n"
    done = no_code([sys.executable, "-c", api, job], repo, env)
    assert done.stdout.startswith("TransportError cluster alpha: login refused: "), done.stdout + done.stderr
    assert len(done.stdout.splitlines()) == 1 and not STATES.search(done.stdout), done.stdout
    assert files(journal) == before  # the journal's record of the job, byte for byte
    assert prompts(login.root) == 1  # nothing could ask
    # with the code at hand again: one login, one code asked, and the job's real state. pam_oath refuses a code
    # already used (its usersfile keeps the last one), as a person would wait for the next code, so does the test
    while int(time.time() // 30) <= code_step:
        time.sleep(0.5)
    again = run_slurmgen("status", job, cwd=repo, env=env)
    assert again.returncode == 0, again.stderr
    assert re.search(rf"^{job}\s+remote-exp\s+COMPLETED\s", again.stdout, re.M), again.stdout
    assert prompts(login.root) == 2
    listed = run_slurmgen("status", cwd=repo, env=env)  # the list too, through the connection just opened
    assert re.search(rf"^{job}\s+remote-exp\s+COMPLETED\s+\(", listed.stdout, re.M), listed.stdout + listed.stderr
    assert prompts(login.root) == 2 and login.accepted() == 2  # the submit's login, and this one
