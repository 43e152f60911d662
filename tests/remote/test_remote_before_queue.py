"""`submit --cluster` over a real sshd before anything is sent: the job's Python asked on the login node in the same
round trip as the store's contents, a 3.8 one refused in one line with nothing uploaded and no sbatch, `--no-check`
letting it through; `submit --dry-run` showing the script and what is new for the store, uploading nothing, and
saying "unknown" when the cluster does not answer. The login node's Slurm commands are stand-ins that record what
they were asked (the real cluster behind sshd: test_remote_cluster.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from recorded import PRIMARY, recorded_text
from runtime.test_runtime_import import find_python
from ssh_server import Sshd, start_sshd

from slurmgen.backends.slurm_ssh.snapshot import take_snapshot


def stand_ins(folder: Path) -> Path:
    """sbatch (records its options, answers job 41) and an empty squeue: what the once-only submit call runs; and
    scontrol answering doctor's two questions from recorded 22.05 output."""
    bin_dir = folder / "slurm-bin"
    bin_dir.mkdir()
    (folder / "config.out").write_text(recorded_text("show-config.out", PRIMARY))
    (folder / "partitions.out").write_text(recorded_text("show-partition-o.out", PRIMARY))
    scontrol = f'case "$*" in\n"show config") cat {folder}/config.out;;\n*) cat {folder}/partitions.out;;\nesac\n'
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\necho "$*" >> {folder}/sbatch.log\necho 41\n')
    (bin_dir / "squeue").write_text("#!/bin/sh\ntrue\n")
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\n{scontrol}")
    for tool in ("sbatch", "squeue", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    return bin_dir


@pytest.fixture
def login(tmp_path: Path) -> Iterator[Sshd]:
    server = start_sshd(path_prepend=str(stand_ins(tmp_path)))
    yield server
    server.close_master()
    server.remove()


def old_python() -> str:
    found = find_python("3.8")
    if found is None:
        pytest.skip("no working python3.8 here (pyenv install 3.8)")
    return found


def project(server: Sshd, tmp_path: Path, python: str) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "proj"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("print('hi')\n")
    (repo / "job.yaml").write_text(f'name: pyc\ncommand: [python3, train.py]\ntime: "20:00"\npython: {python}\n')
    (repo / "clusters.yaml").write_text(f"alpha:\n  host: {server.alias}\n  workdir: {server.root / 'work'}\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SBATCH"))},
           "SLURMGEN_SSH_CONFIG": str(server.config), "SLURMGEN_SSH_DIR": str(server.root / "c"),
           "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "SLURMGEN_HOME": str(tmp_path / "journal")}  # fmt: skip
    return repo, env


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_an_old_python_on_the_login_node_is_refused_before_anything_is_sent(login: Sshd, tmp_path: Path) -> None:
    python = old_python()
    repo, env = project(login, tmp_path, python)
    refused = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert refused.returncode == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr == (
        f"error: {repo / 'job.yaml'}: python: {python} is Python 3.8; slurmgen's batch shell helper and task "
        "supervisor need 3.9 or newer: set the spec field python to a newer interpreter (asked on the login node of "
        "cluster alpha); --no-check submits anyway\n"
    )
    assert tree(login.root / "work") == [] and not (tmp_path / "sbatch.log").exists()  # nothing sent, no sbatch
    assert login.sessions() == 1  # the question rode along with the store's: one round trip

    through = run_slurmgen("submit", "--cluster", "alpha", "--no-check", "job.yaml", cwd=repo, env=env)
    assert (through.returncode, through.stdout) == (0, "41\n"), through.stderr
    assert "--comment=slurmgen:" in (tmp_path / "sbatch.log").read_text()


def test_doctor_on_the_cluster_says_the_old_python_failed(login: Sshd, tmp_path: Path) -> None:
    python = old_python()
    repo, env = project(login, tmp_path, python)
    done = run_slurmgen("doctor", "job.yaml", "--cluster", "alpha", cwd=repo, env=env)
    assert done.returncode == 1, done.stderr
    assert f"\n  python       FAILED: python: {python} is Python 3.8; slurmgen's batch shell helper" in done.stdout
    ok = run_slurmgen("doctor", "job.yaml", "--cluster", "alpha", "--set", 'python="python3"', cwd=repo, env=env)
    assert ok.returncode == 0 and "\n  python       ok: python3 is Python 3." in ok.stdout, ok.stdout + ok.stderr


def test_the_api_refuses_it_too(login: Sshd, tmp_path: Path) -> None:
    repo, env = project(login, tmp_path, old_python())
    code = (
        "import slurmgen, sys\nfrom slurmgen.python_check import PythonRefused\n"
        "try:\n    slurmgen.submit('job.yaml', cluster='alpha')\nexcept PythonRefused as e:\n    print('refused', e)\n"
        "print(slurmgen.submit('job.yaml', cluster='alpha', check=False).id)\n"
    )
    import sys

    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("refused ") and "is Python 3.8" in first and second == "41"
    assert len((tmp_path / "sbatch.log").read_text().splitlines()) == 1  # only the unchecked one


def test_dry_run_shows_the_snapshot_and_the_script_and_sends_nothing(login: Sshd, tmp_path: Path) -> None:
    repo, env = project(login, tmp_path, "python3")
    snap = take_snapshot(repo)
    dry = run_slurmgen("submit", "--cluster", "alpha", "--dry-run", "job.yaml", cwd=repo, env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("#!/bin/bash") and f"{login.root}/work/snapshots/{snap.digest}/files" in dry.stdout
    assert (f"snapshot {snap.digest[:12]} dirty: {len(snap.files)} files, {snap.size} bytes; new for the cluster's "
            f"store: {len(snap.files)} files, {snap.size} bytes") in dry.stderr  # fmt: skip
    assert "would submit: sbatch job.sbatch in" in dry.stderr and "nothing was sent" in dry.stderr
    assert tree(login.root / "work") == [] and not (tmp_path / "sbatch.log").exists()

    assert run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env).returncode == 0
    stored = tree(login.root / "work")
    again = run_slurmgen("submit", "--cluster", "alpha", "--dry-run", "job.yaml", cwd=repo, env=env)
    assert again.returncode == 0 and "new for the cluster's store: nothing (stored already)" in again.stderr
    assert "slurmgen's modules: " in again.stderr and "for the store: stored already" in again.stderr
    assert tree(login.root / "work") == stored  # the dry run changed nothing there
    edit = "print('edited')\n"
    (repo / "train.py").write_text(edit)
    edited = run_slurmgen("submit", "--cluster", "alpha", "--dry-run", "job.yaml", cwd=repo, env=env)
    assert f"new for the cluster's store: 1 files, {len(edit)} bytes" in edited.stderr

    login.close_master()
    login.stop()  # the cluster does not answer: the summary says so, the script is still shown
    offline = run_slurmgen("submit", "--cluster", "alpha", "--dry-run", "job.yaml", cwd=repo, env=env)
    assert offline.returncode == 0 and offline.stdout.startswith("#!/bin/bash"), offline.stderr
    assert "new for the cluster's store: unknown (the cluster did not answer)" in offline.stderr
    assert "note: what is new for the cluster's store is unknown: cluster alpha: host unreachable" in offline.stderr


def test_over_ssh_a_lead_time_cut_to_a_short_limit_is_one_note(login: Sshd, tmp_path: Path) -> None:
    """`submit --cluster` checks the spec alone, then renders it with the run's placement: the note of a lead time
    cut to a quarter of the limit comes once, from the first, in the dry run and in the submission."""
    repo, env = project(login, tmp_path, "python3")
    (repo / "job.yaml").write_text('name: pyc\ncommand: [python3, train.py]\ntime: "5:00"\n')
    for argv in (("--dry-run",), ()):
        done = run_slurmgen("submit", "--cluster", "alpha", *argv, "job.yaml", cwd=repo, env=env)
        assert done.returncode == 0, done.stderr
        said = [line for line in done.stderr.splitlines() if "preemption.lead_time" in line]
        assert said == [
            "note: job.yaml:3: preemption.lead_time: not given, so 75 s, a quarter of the 00:05:00 "
            "limit: the default 300 s is for limits of 00:20:00 or more, and would take too much of a shorter job; "
            "give lead_time to choose"
        ], done.stderr
        assert "preemption.lead_time" not in done.stdout
    assert "--comment=slurmgen:" in (tmp_path / "sbatch.log").read_text()  # the second one was sent


def test_over_ssh_a_spec_without_time_hears_its_partitions_limit_and_an_expedite_the_site_lacks_is_refused(
    login: Sshd, tmp_path: Path
) -> None:
    """The login node's Slurm (recorded 22.05: partition debug with neither limit, no expedited requeue) is asked
    what the Slurm here is asked: the note on the limit a job without `time:` gets, once; and a refusal of
    `recovery.expedite` before anything is uploaded."""
    repo, env = project(login, tmp_path, "python3")
    (repo / "job.yaml").write_text("name: pyc\ncommand: [python3, train.py]\npreemption: false\n")
    done = run_slurmgen("submit", "--cluster", "alpha", "--no-check", "job.yaml", cwd=repo, env=env)
    assert (done.returncode, done.stdout) == (0, "41\n"), done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: time left out")]
    assert notes == [
        "note: time left out: partition debug has neither DefaultTime nor MaxTime: the job may run unlimited, or be "
        + notes[0].split(" or be ", 1)[1]
    ], done.stderr
    sent = (tmp_path / "sbatch.log").read_text()

    (repo / "job.yaml").write_text(
        'name: pyc\ncommand: [python3, train.py]\ntime: "20:00"\nrecovery: {expedite: true}\n'
    )
    refused = run_slurmgen("submit", "--cluster", "alpha", "--no-check", "job.yaml", cwd=repo, env=env)
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: job.yaml: recovery.expedite: Slurm 22.05.8 has no expedited requeue"), line
    assert (tmp_path / "sbatch.log").read_text() == sent  # no second sbatch
