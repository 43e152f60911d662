"""What a remote job's snapshot holds, and a manifest no file name can break: real git repositories with odd names
(a newline, leading and trailing blanks), stored through a real sshd; a manifest naming a path out of the snapshot
is refused on the cluster side before anything is copied; slurmgen's own files, logs and state never go in, so an
unchanged project sends nothing the second time; a tracked directory replaced by a link out of the project is left
out with one line."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from ssh_server import Sshd

from slurmgen.backends.slurm_ssh.placing import not_code
from slurmgen.backends.slurm_ssh.snapshot import SnapshotError, SnapshotFile, take_snapshot, upload
from slurmgen.spec.load import load_file


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def new_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.org")
    git(root, "config", "user.name", "t")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


def stored_files(placed: Path) -> dict[str, str]:
    return {p.relative_to(placed).as_posix(): p.read_text() for p in placed.rglob("*") if p.is_file()}


def test_leading_and_trailing_blanks_survive_the_copy_on_the_cluster(sshd: Sshd, tmp_path: Path) -> None:
    names = {" lead": "1\n", "trail ": "2\n", "sub/ both  ": "3\n", "-dash": "4\n", "plain.py": "5\n"}
    repo = new_repo(tmp_path / "proj", names)
    try:
        up = upload(take_snapshot(repo), sshd.transport(), str(sshd.root / "work"))
        assert stored_files(Path(up.path)) == names
    finally:
        sshd.close_master()


@pytest.mark.parametrize(
    "name",
    [
        "a\nb",
        "x\n" + "0" * 64 + " - /tmp/.ssh/authorized_keys",  # directories whose names make a record of their own
        "tab\there",
        "esc\x1b[2J",
        "cr\r",
    ],
)
def test_a_name_with_a_control_character_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    repo = new_repo(tmp_path / "proj", {"train.py": "x = 1\n"})
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text("planted\n")  # untracked, not ignored: git lists it
    with pytest.raises(SnapshotError) as caught:
        take_snapshot(repo)
    line = str(caught.value)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert repr(name) in line and "control character" in line and "git mv" in line


@pytest.mark.parametrize(
    "path",
    ["../manifest", "../../../victim", "/ABS/victim", "a/../../victim", "./victim", "a//victim", "a/.", "..", ""],
)
def test_the_cluster_refuses_a_manifest_path_out_of_the_snapshot(sshd: Sshd, tmp_path: Path, path: str) -> None:
    """A manifest made by hand (not by take_snapshot, which cannot write one): the copy loop must refuse it."""
    repo = new_repo(tmp_path / "proj", {"ok.txt": "payload\n"})
    work = sshd.root / "work"
    target = path.replace("/ABS", str(tmp_path))
    try:
        t = sshd.transport()
        good = take_snapshot(repo)
        upload(good, t, str(work))  # the object is stored: the forged manifest needs no content sent
        digest = hashlib.sha256(b"payload\n").hexdigest()
        forged = replace(good, files=(SnapshotFile(target, digest, 8, 0o444), *good.files))
        before = sorted(p.name for p in (work / "snapshots").iterdir())
        with pytest.raises(SnapshotError) as caught:
            upload(forged, t, str(work))
        assert "refusing the path" in str(caught.value) and "nothing was submitted" in str(caught.value)
        assert sorted(p.name for p in (work / "snapshots").iterdir()) == before  # no snapshot, no temporary left
        assert not (tmp_path / "victim").exists() and not (sshd.root / "victim").exists()
        assert not (work / "victim").exists() and not (work / "snapshots" / "victim").exists()
    finally:
        sshd.close_master()


def local_run_writes(repo: Path, run: int) -> None:
    """What a local run and a submit leave in the project: the journal, a run's script with literal values, logs,
    the resume state under the spec's state_dir."""
    (repo / ".slurmgen" / "runs" / f"local-{run}").mkdir(parents=True, exist_ok=True)
    with open(repo / ".slurmgen" / "journal.jsonl", "a") as journal:
        journal.write(f'{{"event": "submitted", "run": {run}}}\n')
    (repo / ".slurmgen" / "runs" / f"local-{run}" / "job.sbatch").write_text("export TOKEN=literal-value\n")
    (repo / "logs").mkdir(exist_ok=True)
    (repo / "logs" / f"train-{run}.out").write_text("step 1\n")
    (repo / "ckpt" / "state").mkdir(parents=True, exist_ok=True)
    (repo / "ckpt" / "state" / f"{run}.state").write_bytes(os.urandom(64))
    (repo / "sub" / ".slurmgen").mkdir(parents=True, exist_ok=True)
    (repo / "sub" / ".slurmgen" / "journal.jsonl").write_text("{}\n")


def test_an_unchanged_project_sends_nothing_again_and_no_slurmgen_file_reaches_the_cluster(
    sshd: Sshd, tmp_path: Path
) -> None:
    repo = new_repo(tmp_path / "proj", {"train.py": "x = 1\n", "ckpt/README": "states\n", "sub/m.py": "y = 2\n"})
    work = sshd.root / "work"
    spared = ("logs", "ckpt/state")  # the spec's output and preemption.state_dir
    try:
        t = sshd.transport()
        local_run_writes(repo, 1)
        first_snap = take_snapshot(repo, not_code=spared)
        assert [f.path for f in first_snap.files] == ["ckpt/README", "sub/m.py", "train.py"]
        assert not first_snap.dirty  # what a run wrote is not a change to the code
        first = upload(first_snap, t, str(work))
        local_run_writes(repo, 2)  # a local run, a submit: the journal grows, new logs and state
        again = take_snapshot(repo, not_code=spared)
        assert again.digest == first_snap.digest
        second = upload(again, t, str(work))
        assert (second.path, second.files_sent, second.bytes_sent) == (first.path, 0, 0)
        reached = [p.relative_to(work).as_posix() for p in work.rglob("*")]
        assert not [p for p in reached if ".slurmgen" in p or "/logs" in p or "ckpt/state" in p]
        assert stored_files(Path(first.path)) == {
            "ckpt/README": "states\n",
            "sub/m.py": "y = 2\n",
            "train.py": "x = 1\n",
        }
    finally:
        sshd.close_master()


def test_the_spec_names_its_output_error_and_state_directories_to_leave_out(tmp_path: Path) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(
        'name: train\nnodes: 1\ncommand: [python, train.py]\ntime: "01:00:00"\noutput: out\nerror: err\n'
        "preemption:\n  state_dir: run/state\n"
    )
    assert not_code(load_file(spec_file).spec) == ("out", "err", "run/state")


def test_a_directory_read_through_a_link_out_of_the_project_is_left_out_with_one_line(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "proj", {"train.py": "x = 1\n", "conf/a.yaml": "a: 1\n", "inner/b.py": "b = 1\n"})
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "a.yaml").write_text("secret: 1\n")
    subprocess.run(["rm", "-r", str(repo / "conf")], check=True)
    (repo / "conf").symlink_to(outside)  # git still lists conf/a.yaml: it is tracked
    (repo / "alias").symlink_to(repo / "inner")  # a link that stays inside: taken as a link is (never copied)
    snap = take_snapshot(repo)
    assert [f.path for f in snap.files] == ["inner/b.py", "train.py"]
    assert len(snap.left_out) == 1
    line = snap.left_out[0]
    assert "\n" not in line and f"{repo}/conf" in line and str(outside) in line and "1 files" in line
