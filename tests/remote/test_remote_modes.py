"""What a remote submit leaves on the login node, through a real sshd whose sessions run with umask 022 (a common
cluster default): the run directory is 0700 and what the submit call writes in it 0600, the store's directories
0700 and a stored file no more readable than it is here (a 0600 file is 0400, not 0444); a `from_env` secret
reaches sbatch's environment through ssh's stdin, and no file, no argv, no remote script holds it; an unset one is
refused before anything is sent. sbatch is a stand-in here that records its umask, argv and the secret's sha256;
the real cluster: test_remote_secrets_cluster.py."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from ssh_server import Sshd, start_sshd

from remote.cluster_login import client_env, git, project
from slurmgen.backends.slurm_ssh.snapshot import take_snapshot, upload

TOKEN = "hf_" + "Mw4" * 12  # a Hugging Face token's shape; only this test knows it


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def stand_in_slurm(folder: Path) -> Path:
    """squeue (no job), and sbatch, which records its umask, its argv and the sha256 of its HF_TOKEN (never the
    value), then answers job 41."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    seen = folder / "sbatch.seen"
    sbatch = f"{{ umask; printf '%s\\n' \"$*\"; printf '%s' \"${{HF_TOKEN-unset}}\" | sha256sum; }} > {seen}\necho 41\n"
    for name, body in {"squeue": "true\n", "sbatch": sbatch}.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}")
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.fixture
def login_022(tmp_path: Path) -> Iterator[Sshd]:
    """An sshd on loopback whose sessions have umask 022 (inherited from sshd, started under it) and the stand-in
    Slurm commands first on PATH."""
    bin_dir = stand_in_slurm(tmp_path)
    before = os.umask(0o022)
    try:
        server = start_sshd(path_prepend=str(bin_dir))
    finally:
        os.umask(before)
    yield server
    server.close_master()
    server.remove()


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


def test_a_remote_submit_is_private_under_umask_022_and_its_secret_reaches_only_sbatchs_environment(
    login_022: Sshd, tmp_path: Path
) -> None:
    env = {**client_env(login_022), "HF_TOKEN": TOKEN}
    assert login_022.transport(env).run("umask").stdout.split() == [b"0022"]  # the login node's own umask
    spec = "env:\n  HF_TOKEN: {from_env: HF_TOKEN}\n  PLAIN: literal-value\npreemption: false\n"
    repo = project(login_022, "proj", "modes", "print(1)\n", spec)
    work = login_022.root / "work"
    (work / "runs").mkdir(parents=True)
    (work / "runs").chmod(0o755)  # as an older slurmgen made it under umask 022
    done = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    umask, argv, digest = (tmp_path / "sbatch.seen").read_text().splitlines()
    assert digest.split()[0] == hashlib.sha256(TOKEN.encode()).hexdigest()  # sbatch's environment had the value
    assert TOKEN not in argv and argv.endswith("job.sbatch")
    assert umask == "0022"  # the job's files are as a submit on the login node makes them (SLURM_UMASK)
    (run_dir,) = (work / "runs" / "modes").glob("20*")
    assert mode(run_dir) == 0o700
    assert {p.name: mode(p) for p in run_dir.iterdir()} == {"job.sbatch": 0o600, "jobid": 0o600, "lock": 0o600}
    assert "literal-value" in (run_dir / "job.sbatch").read_text()  # a literal: now only its owner reads it
    assert mode(work / "objects") == 0o700 and mode(work / "snapshots") == 0o700
    # Nothing on either side holds the value: the remote scripts ssh ran are in no file, and sshd's log, the
    # journal, the snapshot and the run directory are all under these roots.
    assert files_containing(login_022.root, TOKEN.encode()) == []
    assert files_containing(repo, TOKEN.encode()) == []
    assert TOKEN not in done.stdout + done.stderr


def test_a_stored_file_keeps_its_private_bits_under_umask_022(login_022: Sshd, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    modes = {"private.txt": 0o600, "shared.txt": 0o644, "run.sh": 0o755, "mine.sh": 0o700, "group.txt": 0o640}
    for name, wanted in modes.items():
        (repo / name).write_text(f"{name}\n")
        (repo / name).chmod(wanted)
    work = login_022.root / "store"
    placed = Path(upload(take_snapshot(repo), login_022.transport(), str(work)).path)
    stored = {name: mode(placed / name) for name in modes}
    assert stored == {"private.txt": 0o400, "shared.txt": 0o444, "run.sh": 0o555, "mine.sh": 0o500, "group.txt": 0o440}
    assert {mode(p) for p in (work / "objects").iterdir()} == {0o400}
    assert mode(work / "objects") == 0o700 and mode(work / "snapshots") == 0o700


def test_an_unset_from_env_variable_is_refused_over_ssh_before_anything_is_sent(login_022: Sshd) -> None:
    """The line a submit on the login node gives; no login, no store, no run directory: the job would have run
    without the variable (sbatch carries an unset one as nothing)."""
    repo = project(login_022, "proj", "unset", "print(1)\n", "env:\n  HF_TOKEN: {from_env: HF_TOKEN}\n")
    env = {k: v for k, v in client_env(login_022).items() if k != "HF_TOKEN"}
    for args in (
        ("submit", "--cluster", "alpha", "job.yaml"),
        ("submit", "--dry-run", "--cluster", "alpha", "job.yaml"),
    ):
        done = run_slurmgen(*args, cwd=repo, env=env)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "job.yaml: env.HF_TOKEN (from_env: HF_TOKEN): not set in this environment; export HF_TOKEN" in line
    assert not (login_022.root / "work").exists()
    assert login_022.accepted() == 0  # not even a login


def test_resuming_a_forgotten_remote_job_forwards_the_variables_its_script_names(tmp_path: Path) -> None:
    """`resume` of a remote job Slurm has forgotten submits its stored script again: the `from_env` variables that
    script names reach sbatch's environment the same way (through stdin, run here by a real bash), and an unset
    one is refused in one line before the call."""
    from slurmgen.backends.slurm_ssh.once import resubmit_remote
    from slurmgen.errors import UsageError
    from slurmgen.journal import Entry, Journal
    from slurmgen.remote.transport import LocalTransport

    bin_dir = stand_in_slurm(tmp_path)
    old = tmp_path / "work" / "runs" / "r" / "t0"
    old.mkdir(parents=True)
    (old / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --export='ALL,HF_TOKEN'\necho run\n")
    entry = Entry("submitted", "t0", "r", "job.yaml", str(old), "job.sbatch", 0.0, "40", "alpha", str(tmp_path / "l"))
    journal = Journal(tmp_path / "journal")
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}:{path}"  # LocalTransport's bash finds the stand-ins first
    try:
        with pytest.raises(UsageError, match=r"forwards HF_TOKEN \(from_env\), not set in this environment"):
            resubmit_remote(LocalTransport("alpha"), entry, "40", "t1", journal, lambda: 1.0, environ={})
        assert not (tmp_path / "sbatch.seen").exists()
        new = resubmit_remote(LocalTransport("alpha"), entry, "40", "t1", journal, lambda: 1.0,
                              environ={"HF_TOKEN": TOKEN})  # fmt: skip
    finally:
        os.environ["PATH"] = path
    assert new == "41"
    _umask, argv, digest = (tmp_path / "sbatch.seen").read_text().splitlines()
    assert digest.split()[0] == hashlib.sha256(TOKEN.encode()).hexdigest() and TOKEN not in argv
    assert mode(old.parent / "t1") == 0o700 and mode(old.parent / "t1" / "job.sbatch") == 0o600
    assert files_containing(tmp_path, TOKEN.encode()) == []
