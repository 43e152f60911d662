"""Code snapshots: what goes in (tracked, uncommitted, untracked but not ignored), stored by content on the cluster
through a real sshd, an unchanged project sends no file content, a stored snapshot never changes, a full disk or a
too large project is one line and leaves no snapshot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from ssh_server import Sshd

from slurmgen.backends.slurm_ssh.snapshot import SnapshotError, package_snapshot, take_snapshot, upload
from slurmgen.remote.transport import LocalTransport


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.org")
    git(root, "config", "user.name", "t")
    (root / "train.py").write_text("print('committed')\n")
    (root / "src" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "src" / "run.sh").chmod(0o755)
    (root / ".gitignore").write_text("data/\n*.ckpt\n")
    (root / "gone.py").write_text("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    (root / "train.py").write_text("print('uncommitted')\n")  # a change not committed
    (root / "new.py").write_text("y = 2\n")  # untracked, not ignored
    (root / "data").mkdir()
    (root / "data" / "big.bin").write_bytes(b"\0" * 1000)  # ignored
    (root / "model.ckpt").write_bytes(b"\0" * 10)  # ignored
    (root / "gone.py").unlink()  # tracked, deleted in the working tree
    return root


def test_the_snapshot_holds_what_the_working_tree_holds(repo: Path) -> None:
    snap = take_snapshot(repo / "src")
    assert [f.path for f in snap.files] == [".gitignore", "new.py", "src/run.sh", "train.py"]
    assert snap.dirty and snap.commit is not None and len(snap.commit) == 40
    assert [f.executable for f in snap.files] == [False, False, True, False]
    assert take_snapshot(repo).digest == snap.digest  # the content decides, not where it was taken from
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second")
    clean = take_snapshot(repo)
    assert not clean.dirty and clean.digest == snap.digest and clean.commit != snap.commit


def test_too_large_names_its_largest_files(repo: Path) -> None:
    (repo / "weights.bin").write_bytes(b"\1" * 1_500_000)
    with pytest.raises(SnapshotError) as caught:
        take_snapshot(repo, limit_mb=1)
    line = str(caught.value)
    assert "\n" not in line and "weights.bin (1.5 MB)" in line and ".gitignore" in line and "--no-snapshot" in line


def test_upload_through_ssh_sends_each_content_once_and_never_changes_a_snapshot(sshd: Sshd, repo: Path) -> None:
    t = sshd.transport()
    work = sshd.root / "cluster-work"
    try:
        first = upload(take_snapshot(repo), t, str(work))
        assert first.files_sent == 4 and first.bytes_sent > 0
        placed = Path(first.path)
        assert (placed / "train.py").read_text() == "print('uncommitted')\n"
        assert os.access(placed / "src" / "run.sh", os.X_OK)
        again = upload(take_snapshot(repo), t, str(work))
        assert (again.path, again.files_sent, again.bytes_sent) == (first.path, 0, 0)  # no file content sent
        (repo / "train.py").write_text("print('edited after submit')\n")
        edited = upload(take_snapshot(repo), t, str(work))
        assert edited.files_sent == 1 and edited.bytes_sent == len("print('edited after submit')\n")
        assert (placed / "train.py").read_text() == "print('uncommitted')\n"  # the submitted code stays
        assert not os.access(placed / "train.py", os.W_OK) or os.geteuid() == 0
        assert oct((placed / "train.py").stat().st_mode & 0o222) == "0o0"
        assert sorted(p.name for p in (work / "snapshots").iterdir()) == sorted(
            [Path(first.path).parent.name, Path(edited.path).parent.name]
        )
    finally:
        sshd.close_master()


def test_a_full_disk_is_one_line_and_leaves_no_snapshot(repo: Path, tmp_path: Path) -> None:
    work = tmp_path / "small"
    work.mkdir()
    small = ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(work)]  # the store must be the user's own
    mounted = subprocess.run(small, capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        (repo / "weights.bin").write_bytes(os.urandom(200_000))
        with pytest.raises(SnapshotError) as caught:
            upload(take_snapshot(repo), LocalTransport("alpha"), str(work))
        line = str(caught.value)
        assert "\n" not in line and "KB free there" in line and "nothing was submitted" in line
        assert list((work / "snapshots").iterdir()) == []
        assert [p.name for p in (work / "objects").iterdir() if p.name.startswith(".in")] == []
    finally:
        subprocess.run(["umount", str(work)], check=False)


def test_the_shipped_package_is_all_of_slurmgen_wherever_the_snapshot_module_lives() -> None:
    """What a remote job runs: every module of slurmgen, named from the package's top (slurmgen/...), so that
    `python3 -m slurmgen.batch` and the task supervisor import on the cluster."""
    names = {f.path for f in package_snapshot().files}
    assert {"slurmgen/__init__.py", "slurmgen/batch/__init__.py", "slurmgen/task/__init__.py"} <= names
    assert all(name.startswith("slurmgen/") for name in names)
