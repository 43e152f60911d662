"""A remote job on the real cluster, through the test sshd, from a login node whose sessions have umask 022: a
`from_env` secret reaches the task (it writes the value's sha256, never the value) through ssh's stdin and
sbatch's environment, and is in no command line of any process while the job runs (/proc/*/cmdline), in no file
the job or slurmgen wrote on either side, and in nothing `scontrol` shows; the run directory is 0700, job.sbatch
0600, and a 0600 file of the project is 0400 in the store. As the local path: tests/security/test_secrets_cluster.py."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster
from ssh_server import Sshd

from remote.cluster_login import client_env, project, start_login, wait_state

pytestmark = pytest.mark.slurm

TOKEN = "hf_" + "Rk8" * 12  # a Hugging Face token's shape; only this test knows it


@pytest.fixture
def login_022(slurm_cluster: SlurmCluster) -> Iterator[Sshd]:
    before = os.umask(0o022)  # sshd's sessions inherit it: a login node's common default
    try:
        server = start_login(slurm_cluster)
    finally:
        os.umask(before)
    yield server
    server.close_master()
    server.remove()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def cmdlines_now() -> dict[int, bytes]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:  # ended meanwhile
                continue
    return out


def files_containing(root: Path, needle: bytes) -> list[Path]:
    found = []
    for p in root.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink() and needle in p.read_bytes():
                found.append(p)
        except OSError:  # a socket, a file removed meanwhile
            continue
    return found


def test_a_from_env_secret_reaches_a_remote_task_and_no_file_or_command_line_holds_it(
    login_022: Sshd, slurm_cluster: SlurmCluster
) -> None:
    seen, go = login_022.root / "seen.sha256", login_022.root / "go"
    program = (
        "import hashlib, os, pathlib, time\n"
        # written beside, then renamed: the test, polling for the file, never reads it half-written
        "digest = hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest()\n"
        f"pathlib.Path({str(seen)!r} + '.part').write_text(digest)\n"
        f"os.replace({str(seen)!r} + '.part', {str(seen)!r})\n"
        f"go = pathlib.Path({str(go)!r})\n"
        "for _ in range(900):\n    if go.exists():\n        break\n    time.sleep(0.1)\n"
        "print('secret job done', flush=True)\n"
    )
    repo = project(login_022, "proj", "remote-secret", program,
                   "preemption: false\nenv:\n  HF_TOKEN: {from_env: HF_TOKEN}\n")  # fmt: skip
    (repo / "private.txt").write_text("only mine\n")
    (repo / "private.txt").chmod(0o600)
    env = {**client_env(login_022), "HF_TOKEN": TOKEN}
    t = login_022.transport(env, persist=60)
    assert t.run("umask").stdout.split() == [b"0022"]  # the login node's umask, as the job's submit sees it
    done = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    work = login_022.root / "work"
    log_dir = f"{work}/runs/remote-secret/logs"
    deadline = time.monotonic() + 240  # the cluster is shared: the job may pend a while
    while not seen.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert seen.exists(), f"job {job} never ran its program"
    assert seen.read_text() == hashlib.sha256(TOKEN.encode()).hexdigest()  # the task got the value
    # While the job runs: no process on this machine (the nodes' slurmstepd, batch shell, srun and tasks among
    # them: the cluster's nodes are namespaces of this machine) has the value on its command line.
    running = cmdlines_now()
    assert any(b"train.py" in line for line in running.values())  # the scan saw the job's own task
    assert [pid for pid, line in running.items() if TOKEN.encode() in line] == []
    go.touch()
    assert wait_state(t, job, log_dir, {"COMPLETED", "FAILED"}, timeout=120) == "COMPLETED"

    journal = [json.loads(line) for line in (login_022.root / "journal" / "journal.jsonl").read_text().splitlines()]
    run_dir = Path(journal[-1]["run_dir"])
    assert mode(run_dir) == 0o700 and mode(run_dir / "job.sbatch") == 0o600
    assert "#SBATCH --export='ALL,HF_TOKEN'" in (run_dir / "job.sbatch").read_text()
    code = Path(journal[-1]["extra"]["code_dir"])
    assert mode(code / "private.txt") == 0o400 and mode(code / "train.py") == 0o444
    assert mode(work / "objects") == 0o700 and mode(work / "snapshots") == 0o700
    assert "secret job done" in "".join(p.read_text(errors="replace") for p in Path(log_dir).rglob("*.log"))
    # Every file on either side: the store, the run directory, the logs and state, the journal, sshd's log, the
    # project; and what slurmgen printed.
    assert files_containing(login_022.root, TOKEN.encode()) == []
    assert TOKEN not in done.stdout + done.stderr
    for argv in (["scontrol", "-dd", "show", "job", job], ["scontrol", "write", "batch_script", job, "-"]):
        shown = slurm_cluster.run(argv, timeout=30)
        assert shown.returncode == 0 and TOKEN not in shown.stdout + shown.stderr, (argv, shown.stderr)
