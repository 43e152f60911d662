"""Checkpoints under file-system faults, with real files and real file systems: another save in flight in the
same directory, leftovers that cannot be deleted (an immutable file, a read-only remount), a full disk, a
corrupt or planted checkpoint. Single process (DCP's one-process mode); the multi-rank stop is in
test_checkpoint_stop_faults.py.
"""

from __future__ import annotations

import errno
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmgen import atomic
from slurmgen.runtime.checkpoint import layout
from slurmgen.runtime.checkpoint.background import PendingSave
from slurmgen.runtime.checkpoint.commit import CheckpointError
from slurmgen.runtime.checkpoint.dcp_io import BEFORE_COMMIT

from .test_checkpoint_store import Gate, make_store

pytestmark = pytest.mark.torch


def test_a_sweep_leaves_the_saves_in_flight_of_another_name_alone(tmp_path: Path, torch_module: Any) -> None:
    """`ckpt` and `ckpt.v2` in one directory: starting `ckpt` must not delete `ckpt.v2`'s saves in progress."""
    torch = torch_module
    gate = Gate(BEFORE_COMMIT)
    other = make_store(tmp_path, phase=gate)
    other.path, other.name = str(tmp_path / "ckpt.v2"), "ckpt.v2"
    pending = other.save({"w": torch.ones(4)}, "periodic", async_=True, sharded=True)  # held before its commit
    assert isinstance(pending, PendingSave) and gate.reached.wait(60)
    plain_written, plain_go = threading.Event(), threading.Event()

    def slow_write(tmp: str) -> None:  # a plain save of ckpt.v2, held halfway through its write
        Path(tmp).write_bytes(b"half")
        plain_written.set()
        assert plain_go.wait(60)
        Path(tmp).write_bytes(b"whole")

    writer = threading.Thread(target=atomic.replace_with, args=(tmp_path / "ckpt.v2", slow_write))
    writer.start()
    assert plain_written.wait(60)
    in_flight = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
    assert len(in_flight) == 2 and all(name.startswith(".ckpt.v2.") for name in in_flight)
    # A leftover of `ckpt` itself (a killed plain write and a killed sharded one) must still go.
    own = [tmp_path / ".ckpt.a1b2c3d4.tmp", tmp_path / ".ckpt.000004.0badc0de.tmp"]
    own[0].write_bytes(b"x")
    own[1].mkdir()
    mine = make_store(tmp_path)
    mine.path, mine.name = str(tmp_path / "ckpt"), "ckpt"
    assert sorted(mine.sweep()) == sorted(str(p) for p in own)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == in_flight
    gate.open.set()
    plain_go.set()
    writer.join(60)
    record = pending.wait(60)
    assert record is not None and record.path == str(tmp_path / "ckpt.v2.000001")
    assert (tmp_path / "ckpt.v2").read_bytes() == b"whole"


@pytest.fixture()
def immutable(tmp_path: Path) -> Iterator[list[Path]]:
    """Files made immutable with chattr +i (root cannot delete them either); made mutable again at teardown."""
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_a_leftover_that_cannot_be_deleted_is_a_warning_not_a_failed_start(
    tmp_path: Path, immutable: list[Path], torch_module: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    stuck_dir = tmp_path / ".77.state.000003.0badc0de.tmp"
    stuck_dir.mkdir()
    (stuck_dir / "__0_0.distcp").write_bytes(b"shard")
    (stuck_dir / "loose").write_bytes(b"goes")
    stuck_file = tmp_path / ".77.state.q1w2e3r4.tmp"
    stuck_file.write_bytes(b"half a state")
    for path in (stuck_dir / "__0_0.distcp", stuck_file):
        subprocess.run(["chattr", "+i", str(path)], check=True)
        immutable.append(path)
    store = make_store(tmp_path)
    assert store.sweep() == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("slurmgen: warning: could not remove ") for line in err)
    assert f"{stuck_dir}, left by an interrupted save: {stuck_dir / '__0_0.distcp'}: Operation not permitted" in err[0]
    assert f"{stuck_file}, left by an interrupted write: Operation not permitted; it stays" in err[1]
    assert not (stuck_dir / "loose").exists()  # what could go, went
    # The job goes on: it saves and loads beside the leftovers.
    store.save({"w": torch_module.ones(2)}, "periodic", async_=False, sharded=True)
    into = {"w": torch_module.zeros(2)}
    assert store.load(into) and float(into["w"].sum()) == 2.0


def test_a_read_only_state_directory_is_a_warning_at_start(
    small_tmpfs: Path, torch_module: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    (small_tmpfs / ".77.state.000002.0badc0de.tmp").mkdir()
    (small_tmpfs / ".77.state.000002.0badc0de.tmp" / ".metadata").write_bytes(b"m")
    (small_tmpfs / ".77.state.a1b2c3d4.tmp").write_bytes(b"x")
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    assert make_store(small_tmpfs).sweep() == []
    err = capsys.readouterr().err
    assert err.count("Read-only file system; it stays") == 2, err
    assert os.path.isdir(small_tmpfs / ".77.state.000002.0badc0de.tmp")
    assert layout.sweep_dirs(str(small_tmpfs), "77.state") == []  # the batch shell's call: no warning asked, no raise


def fill(directory: Path) -> None:
    """Write a filler file until the file system says ENOSPC: the disk is now full."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_background_save_on_a_full_disk_is_reported_at_once_and_raised_at_the_next_call(
    small_tmpfs: Path, torch_module: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = torch_module
    failures: list[tuple[str, bool]] = []
    store = make_store(small_tmpfs, on_failure=lambda line, background: failures.append((line, background)))
    first = store.save({"w": torch.full((50_000,), 1.0)}, "periodic", async_=True, sharded=False)  # 200 kB
    assert isinstance(first, PendingSave) and first.wait(60) is not None
    fill(small_tmpfs)
    capsys.readouterr()
    second = store.save({"w": torch.full((50_000,), 2.0)}, "periodic", async_=True, sharded=False)
    assert isinstance(second, PendingSave)
    with pytest.raises(CheckpointError):
        second.wait(60)
    # Reported at once, on its own, in one line that names the cause.
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"slurmgen: saving the state in the background to {small_tmpfs / '77.state'} failed: ")
    assert "the disk is full (" in err[0] and err[0].endswith("; the previous state stays")
    assert failures == [(err[0].removeprefix("slurmgen: "), True)]
    # The next save raises it (and writes nothing); the one after that tries again, and fails the same way.
    with pytest.raises(CheckpointError, match=r"an earlier save in the background failed: saving .* the disk is full"):
        store.save({"w": torch.full((50_000,), 3.0)}, "periodic", async_=True, sharded=False)
    third = store.save({"w": torch.full((50_000,), 3.0)}, "periodic", async_=True, sharded=False)
    assert isinstance(third, PendingSave)
    with pytest.raises(CheckpointError, match=r"an earlier save in the background failed: .* the disk is full"):
        store.wait()
    assert len(failures) == 2
    assert store.wait() == first.wait(0)  # raised once; the newest durable save is still the first
    loaded = store.load()
    assert loaded is not None and float(loaded["w"][0]) == 1.0  # the previous state stays


def test_a_plain_save_on_a_full_disk_names_the_cause(small_tmpfs: Path, torch_module: Any) -> None:
    store = make_store(small_tmpfs)
    fill(small_tmpfs)
    # torch's own error is `RuntimeError: [enforce fail at inline_container.cc:...] unexpected pos ...`.
    with pytest.raises(
        CheckpointError,
        match=r"failed: the disk is full \(\d+ KiB free .*\(RuntimeError: .*; there is no previous state$",
    ):
        store.save({"w": torch_module.ones(100_000)}, "periodic", async_=False, sharded=False)
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["filler"]  # nothing half-written left


def test_a_plain_save_to_a_read_only_directory_names_the_cause(small_tmpfs: Path, torch_module: Any) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    with pytest.raises(CheckpointError, match=r"failed: the file system is read-only \(OSError: \[Errno 30\]"):
        make_store(small_tmpfs).save({"w": torch_module.ones(10)}, "periodic", async_=False, sharded=False)


def test_a_sharded_save_on_a_full_disk_names_the_cause(small_tmpfs: Path, torch_module: Any) -> None:
    store = make_store(small_tmpfs)
    store.save({"w": torch_module.ones(1000)}, "periodic", async_=False, sharded=True)
    fill(small_tmpfs)
    # torch's own error is `RuntimeError: [enforce fail at inline_container.cc:...] unexpected pos ...`.
    with pytest.raises(CheckpointError, match=r"failed: rank 0: the disk is full \(.*; the previous checkpoint stays$"):
        store.save({"w": torch_module.ones(1_000_000)}, "periodic", async_=False, sharded=True)
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["77.state.000001", "filler"]
