"""Loading under faults, with real files: a corrupt or partial newest state falls back to the previous complete
one; a checkpoint another user could have written is never unpickled; the newest is judged by one clock.
Single process (DCP's one-process mode)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from ranks import Launcher

from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.runtime.checkpoint import layout
from slurmgen.runtime.checkpoint.commit import CheckpointError
from slurmgen.runtime.checkpoint.settings import StoreSettings
from slurmgen.runtime.checkpoint.store import CheckpointStore
from slurmgen.runtime.peers import Peers

from .test_checkpoint_store import make_store

pytestmark = pytest.mark.torch

NOBODY = 65534


class Payload:
    """Unpickling it creates the file `proof`: what a planted checkpoint would run."""

    def __init__(self, proof: Path) -> None:
        self.proof = proof

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.proof), "w"))


def two_checkpoints(tmp_path: Path, torch: Any) -> CheckpointStore:
    store = make_store(tmp_path)
    for value in (1.0, 2.0):
        store.save({"w": torch.full((1000,), value), "step": int(value)}, "periodic", async_=False, sharded=True)
    return store


def corrupt(newest: Path, how: str) -> None:
    if how == "truncated shard":
        shard = next(newest.glob("*.distcp"))
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    elif how == "missing .metadata":
        (newest / ".metadata").unlink()
    elif how == "garbage .metadata":
        (newest / ".metadata").write_bytes(os.urandom(300))
    elif how == "marker not an object":
        (newest / layout.MARKER).write_text("[1, 2]\n")
    elif how == "marker not JSON":
        (newest / layout.MARKER).write_bytes(b"\xff\xfe{")


@pytest.mark.parametrize(
    "how", ["truncated shard", "missing .metadata", "garbage .metadata", "marker not an object", "marker not JSON"]
)
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one(
    tmp_path: Path, torch_module: Any, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    torch = torch_module
    two_checkpoints(tmp_path, torch)
    newest, previous = tmp_path / "77.state.000002", tmp_path / "77.state.000001"
    corrupt(newest, how)
    capsys.readouterr()
    into = {"w": torch.zeros(1000), "step": 0}
    assert make_store(tmp_path).load(into) is True
    assert into["step"] == 1 and torch.equal(into["w"], torch.full((1000,), 1.0))
    err = capsys.readouterr().err.strip().splitlines()
    warning = [line for line in err if line.startswith("slurmgen: warning: ")]
    assert len(warning) == 1, err
    assert warning[0].startswith(f"slurmgen: warning: resuming from {previous}, not from the newer {newest} (")
    assert warning[0].endswith("which is left in place")
    assert newest.is_dir()  # uncertainty keeps data: the corrupt one is not deleted


@pytest.mark.parametrize("how", ["random bytes", "truncated", "a directory"])
def test_a_corrupt_plain_state_is_one_line_without_advice_to_turn_the_safe_loader_off(
    tmp_path: Path, torch_module: Any, how: str
) -> None:
    torch = torch_module
    store = make_store(tmp_path)
    store.save({"w": torch.ones(1000)}, "periodic", async_=False, sharded=False)
    state = tmp_path / "77.state"
    if how == "random bytes":
        state.write_bytes(os.urandom(4000))
    elif how == "truncated":
        state.write_bytes(state.read_bytes()[:1500])
    else:
        state.unlink()
        state.mkdir()
    with pytest.raises(CheckpointError) as raised:
        make_store(tmp_path).load()
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"no resume state could be read: {state} (")
    assert "weights_only" not in message and "safe loader" not in message
    # With a sharded predecessor it falls back to it.
    (tmp_path / "keep").mkdir()
    older = make_store(tmp_path / "keep")
    older.save({"w": torch.full((1000,), 7.0)}, "periodic", async_=False, sharded=True)
    os.rename(tmp_path / "keep" / "77.state.000001", tmp_path / "77.state.000001")
    os.utime(tmp_path / "77.state.000001" / layout.MARKER, (1, 1))  # older than the corrupt plain state
    into = {"w": torch.zeros(1000)}
    assert make_store(tmp_path).load(into) is True and float(into["w"][0]) == 7.0


def test_a_refused_object_in_a_whole_plain_state_still_gets_the_advice(tmp_path: Path, torch_module: Any) -> None:
    make_store(tmp_path).save({"w": torch_module.ones(2), "x": Payload(tmp_path / "p")}, "periodic", async_=False,
                              sharded=False)  # fmt: skip
    with pytest.raises(RuntimeSetupError, match=r"Unsupported global.*use Preemption\(weights_only=False\)"):
        make_store(tmp_path).load()
    assert not (tmp_path / "p").exists()


def plant(directory: Path, seq: int, proof: Path, owner: int = NOBODY, mode: int = 0o644) -> Path:
    """A checkpoint directory as another user would plant it: a valid marker (job id and spec hash are in the
    rendered script) and a `.metadata` whose unpickling creates `proof`."""
    planted = directory / layout.complete_name("77.state", seq)
    planted.mkdir()
    marker = {"format": 1, "kind": "sharded", "job": "77", "spec": "abc", "run": 0, "cause": "periodic"}
    (planted / layout.MARKER).write_text(json.dumps(marker))
    (planted / ".metadata").write_bytes(pickle.dumps(Payload(proof)))
    (planted / "__0_0.distcp").write_bytes(b"")
    for path in (planted, *planted.iterdir()):
        os.chown(path, owner, owner)
        os.chmod(path, mode | (0o111 if path.is_dir() else 0))
    return planted


@pytest.mark.parametrize(("owner", "mode"), [(NOBODY, 0o644), (0, 0o664)], ids=["another user's", "group-writable"])
def test_a_planted_checkpoint_is_never_unpickled(
    tmp_path: Path, torch_module: Any, capsys: pytest.CaptureFixture[str], owner: int, mode: int
) -> None:
    torch = torch_module
    proof = tmp_path / "code-ran"
    planted = plant(tmp_path, 1, proof, owner if owner else os.geteuid(), mode)
    into = {"w": torch.zeros(3)}
    with pytest.raises(CheckpointError) as raised:
        make_store(tmp_path).load(into)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"no resume state could be read: {planted} ({planted}")
    assert ("is owned by uid 65534, not by this user" if owner else "is writable by group or others") in message
    assert not proof.exists()
    # Beside a checkpoint of our own, older than the planted one, the load falls back to ours.
    store = make_store(tmp_path)
    store.save({"w": torch.full((3,), 5.0)}, "periodic", async_=False, sharded=True)  # 77.state.000002
    os.utime(tmp_path / "77.state.000002" / layout.MARKER, (1, 1))  # older than the planted one
    capsys.readouterr()
    assert make_store(tmp_path).load(into) is True and float(into["w"][0]) == 5.0
    assert f"not from the newer {planted} (" in capsys.readouterr().err
    assert not proof.exists()


def test_a_planted_plain_state_is_not_read_even_with_the_safe_loader_off(tmp_path: Path, torch_module: Any) -> None:
    torch = torch_module
    proof = tmp_path / "code-ran"
    state = tmp_path / "77.state"
    envelope = {"slurmgen": {"job": "77", "spec": "abc"}, "state": {"w": torch.ones(2), "x": Payload(proof)}}
    torch.save(envelope, state)
    os.chown(state, NOBODY, NOBODY)
    settings = StoreSettings("77", "abc", 0, 2, named=False, weights_only=False)
    store = CheckpointStore(
        str(state), settings, Peers(JobContext.from_environ({}), timeout=60.0, exit=lambda code: None)
    )
    with pytest.raises(CheckpointError, match=r"is owned by uid 65534, not by this user"):
        store.load()
    assert not proof.exists()
    os.chown(state, os.geteuid(), os.getegid())  # the same file, ours: loaded (and its object built)
    assert store.load()["w"].sum() == 2 and proof.exists()


def test_checkpoints_saved_under_a_group_umask_still_load(tmp_path: Path, torch_module: Any) -> None:
    """Sites with umask 002 make group-writable files; the saver takes that write bit away before it commits."""
    torch = torch_module
    old = os.umask(0o002)
    try:
        make_store(tmp_path).save({"w": torch.full((3,), 4.0)}, "periodic", async_=False, sharded=True)
    finally:
        os.umask(old)
    into = {"w": torch.zeros(3)}
    assert make_store(tmp_path).load(into) is True and float(into["w"][0]) == 4.0


def test_the_newest_state_is_judged_by_the_file_servers_clock(tmp_path: Path, torch_module: Any) -> None:
    """The marker's `time` is the saving node's clock; a node an hour ahead must not make an older sharded
    checkpoint look newer than a plain state saved after it (whose time is the file's mtime)."""
    torch = torch_module
    store = make_store(tmp_path)
    store.save({"w": torch.full((2,), 1.0)}, "periodic", async_=False, sharded=True)
    marker = tmp_path / "77.state.000001" / layout.MARKER
    data = json.loads(marker.read_text())
    data["time"] += 3600  # what a node clock one hour fast writes
    stamp = marker.stat()
    marker.write_text(json.dumps(data))
    os.utime(marker, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # as written then, by the file server's clock
    store.save({"w": torch.full((2,), 2.0)}, "periodic", async_=False, sharded=False)
    into = {"w": torch.zeros(2)}
    assert make_store(tmp_path).load(into) is True and float(into["w"][0]) == 2.0


@pytest.mark.slow
def test_two_ranks_fall_back_together_when_a_shard_cannot_be_read(tmp_path: Path, launcher: Launcher) -> None:
    """A shard of the newest checkpoint overwritten with garbage of its own length passes rank 0's look (sizes
    match) and fails inside DCP's read: both ranks agree, and both resume from the checkpoint before it."""
    import sys

    from runtime.runtime_helpers import base_env, free_port
    from slurmgen import contract

    worker = Path(__file__).parents[1] / "fsdp_worker.py"  # tests/runtime/
    state = tmp_path / "state"

    def run(*args: str, restarts: int = 0) -> list[tuple[int, str, str]]:
        port, ranks = str(free_port()), launcher.new()
        for rank in range(2):
            env = base_env(
                SLURM_JOB_ID="77", SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_NTASKS="2",
                SLURM_JOB_NODELIST="localhost", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                SLURM_RESTART_COUNT=str(restarts), **{contract.STATE_DIR: str(state), contract.SPEC_HASH: "abc"},
            )  # fmt: skip
            ranks.start([sys.executable, "-m", "slurmgen.task", "--", sys.executable, str(worker), *args], env)
        return [(r.returncode, r.stdout, r.stderr) for r in ranks.results(240)]

    first = run("--steps", "4", "--save-every", "1", "--report-saves")
    assert [code for code, _, _ in first] == [0, 0], first[0][2][-3000:]
    saved = {w[1]: w[2:] for w in (line.split() for line in first[0][1].splitlines()) if w and w[0] == "SAVED"}
    newest = state / "77.state.000004"
    assert newest.is_dir() and (state / "77.state.000003").is_dir()
    shard = newest / "__1_0.distcp"
    shard.write_bytes(os.urandom(shard.stat().st_size))
    second = run("--steps", "3", restarts=1)
    assert [code for code, _, _ in second] == [0, 0], second[0][2][-3000:] + second[1][2][-3000:]
    resumed = [next(line.split() for line in out.splitlines() if line.startswith("RESUMED")) for _, out, _ in second]
    assert resumed[0][1:] == ["3", *saved["3"]] and resumed[1][1] == "3"  # rank 0 prints the full-state digest
    warning = f"warning: resuming from {state / '77.state.000003'}, not from the newer {newest} ("
    assert warning in second[0][2] and newest.is_dir()
