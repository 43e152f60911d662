"""What a laptop has, or lacks: a PATH without git or without ssh, macOS's git stub, a git older than `git -C`, and
a project that is not a git repository, each met by slurmgen's own code with one line (or a snapshot of the
directory's files), never a traceback. Each test builds a bin directory holding only the tools it wants."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from slurmgen.backends.slurm_ssh.project_files import GitUnusable, ignored, parse_gitignore
from slurmgen.backends.slurm_ssh.snapshot import take_snapshot
from slurmgen.remote.transport import SshTransport, TransportError

REAL_GIT = shutil.which("git")


def bin_with(folder: Path, *tools: str, scripts: dict[str, str] | None = None) -> Path:
    """A bin directory holding links to these tools of this machine, and these scripts."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    for name, body in (scripts or {}).items():
        (folder / name).write_text(body)
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / ".gitignore").write_text("data/\n")
    (root / "data").mkdir()
    (root / "data" / "big.bin").write_bytes(b"\0" * 100)
    return root


def test_a_directory_that_is_not_a_repository_is_snapshotted_from_its_files(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "src" / "__pycache__").mkdir(parents=True)
    (root / "data").mkdir()
    (root / ".slurmgen").mkdir()
    (root / "train.py").write_text("print('hi')\n")
    (root / "src" / "model.py").write_text("x = 1\n")
    (root / "src" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    (root / "src" / "run.ckpt").write_bytes(b"\0" * 10)
    (root / "data" / "big.bin").write_bytes(b"\0" * 10)
    (root / "build").mkdir()
    (root / "build" / "out.o").write_bytes(b"\0")
    (root / ".slurmgen" / "journal.jsonl").write_text("{}\n")
    (root / ".gitignore").write_text("# data and checkpoints stay on the cluster\ndata/\n*.ckpt\n/build\n!keep.ckpt\n")
    snap = take_snapshot(root)
    assert [f.path for f in snap.files] == [".gitignore", "src/model.py", "train.py"]
    assert snap.commit is None and not snap.dirty
    assert snap.note is not None and "\n" not in snap.note
    assert snap.note.startswith(f"note: {root} is not a git repository: the snapshot takes its 3 files")
    assert "'!' lines are not read" in snap.note


def test_the_gitignore_subset() -> None:
    patterns, negated = parse_gitignore("logs/\n/top.txt\nsrc/*.o\n**/cache\n*.ckpt\n")
    assert not negated
    assert ignored("a/logs", True, patterns) and not ignored("a/logs", False, patterns)  # directories only
    assert ignored("top.txt", False, patterns) and not ignored("sub/top.txt", False, patterns)  # anchored
    assert ignored("src/x.o", False, patterns) and not ignored("lib/x.o", False, patterns)
    assert ignored("cache", True, patterns) and ignored("a/b/cache", True, patterns)
    assert ignored("deep/w.ckpt", False, patterns) and not ignored("train.py", False, patterns)


def test_a_path_without_git_gives_one_line_for_a_repository_and_a_snapshot_for_a_plain_directory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(bin_with(tmp_path / "bin", "python3")))
    with pytest.raises(GitUnusable) as caught:
        take_snapshot(repo)
    line = str(caught.value)
    assert "\n" not in line and "not inside a git repository" not in line
    assert line.startswith(f"{repo}: a git repository, and git is not on PATH: install git (")
    assert "xcode-select --install" in line and "--no-snapshot" in line
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.py").write_text("print('hi')\n")
    assert [f.path for f in take_snapshot(plain).files] == ["train.py"]


def test_the_cli_says_the_missing_git_in_one_line(repo: Path, tmp_path: Path) -> None:
    (repo / "job.yaml").write_text('name: j\ncommand: [python3, train.py]\ntime: "20:00"\n')
    (repo / "clusters.yaml").write_text(f"alpha:\n  host: nowhere.invalid\n  workdir: {tmp_path / 'work'}\n")
    only = bin_with(tmp_path / "bin", "ssh")
    env = {**os.environ, "PATH": str(only), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "SLURMGEN_HOME": str(tmp_path)}
    done = run_slurmgen("submit", "--cluster", "alpha", "--no-check", "job.yaml", cwd=repo, env=env)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "git is not on PATH: install git" in done.stderr, done.stderr


def test_macos_git_stub_is_not_called_a_missing_repository(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = "xcode-select: note: no developer tools were found in '/Applications/Xcode.app', requesting install."
    stub = f"#!/bin/sh\necho {shlex.quote(said)} >&2\nexit 1\n"  # what macOS's /usr/bin/git does without them
    monkeypatch.setenv("PATH", f"{bin_with(tmp_path / 'bin', scripts={'git': stub})}:/usr/bin:/bin")
    with pytest.raises(GitUnusable) as caught:
        take_snapshot(repo)
    line = str(caught.value)
    assert "not inside a git repository" not in line and "\n" not in line
    assert "git does not run (xcode-select: note: no developer tools were found" in line
    assert "macOS: xcode-select --install" in line


def test_a_git_older_than_dash_c_still_lists_the_files(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git before 1.8.5 answers `git -C` with "Unknown option: -C" and its usage (exit 129); otherwise the real git
    old = f'#!/bin/sh\nif [ "$1" = -C ]; then echo "Unknown option: -C" >&2; exit 129; fi\nexec {REAL_GIT} "$@"\n'
    monkeypatch.setenv("PATH", f"{bin_with(tmp_path / 'bin', scripts={'git': old})}:/usr/bin:/bin")
    snap = take_snapshot(repo)
    assert [f.path for f in snap.files] == [".gitignore", "train.py"] and snap.dirty and snap.note is None


def test_a_path_without_ssh_is_one_line(tmp_path: Path) -> None:
    env = {"PATH": str(bin_with(tmp_path / "bin", "python3")), "SLURMGEN_SSH_DIR": str(tmp_path / "c")}
    t = SshTransport("alpha", "login", environ=env)
    old = os.environ["PATH"]
    os.environ["PATH"] = env["PATH"]  # subprocess looks the program up on this process's PATH
    try:
        with pytest.raises(TransportError) as caught:
            t.run("true")
    finally:
        os.environ["PATH"] = old
    line = str(caught.value)
    assert line.startswith("cluster alpha: ssh (the OpenSSH client) is not on PATH: install it (") and "\n" not in line


def test_the_cli_says_the_missing_ssh_in_one_line(repo: Path, tmp_path: Path) -> None:
    (repo / "job.yaml").write_text('name: j\ncommand: [python3, train.py]\ntime: "20:00"\n')
    (repo / "clusters.yaml").write_text(f"alpha:\n  host: login\n  workdir: {tmp_path / 'work'}\n")
    only = bin_with(tmp_path / "bin", "git")
    env = {**os.environ, "PATH": str(only), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "SLURMGEN_HOME": str(tmp_path),
           "SLURMGEN_SSH_DIR": str(tmp_path / "c")}  # fmt: skip
    for args in (("submit", "--cluster", "alpha", "job.yaml"), ("doctor", "job.yaml", "--cluster", "alpha")):
        done = run_slurmgen(*args, cwd=repo, env=env)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "ssh (the OpenSSH client) is not on PATH" in done.stderr, done.stderr
