"""Checkpoints under file-system faults, with real files and real file systems: another save in flight in the
same directory, leftovers that cannot be deleted (an immutable file, a read-only remount), a full disk, a
corrupt or planted checkpoint. Single process (DCP's one-process mode); the multi-rank stop is in
test_checkpoint_stop_faults.py.
"""

from __future__ import annotations

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
from slurmgen.runtime.checkpoint.dcp_io import BEFORE_COMMIT

from .test_checkpoint_store import Gate, make_store

pytestmark = pytest.mark.torch


@pytest.fixture()
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own (we are root in CI), unmounted at teardown."""
    mount = tmp_path / "fs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


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
    small_fs: Path, torch_module: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    (small_fs / ".77.state.000002.0badc0de.tmp").mkdir()
    (small_fs / ".77.state.000002.0badc0de.tmp" / ".metadata").write_bytes(b"m")
    (small_fs / ".77.state.a1b2c3d4.tmp").write_bytes(b"x")
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    assert make_store(small_fs).sweep() == []
    err = capsys.readouterr().err
    assert err.count("Read-only file system; it stays") == 2, err
    assert os.path.isdir(small_fs / ".77.state.000002.0badc0de.tmp")
    assert layout.sweep_dirs(str(small_fs), "77.state") == []  # the batch shell's call: no warning asked, no raise
