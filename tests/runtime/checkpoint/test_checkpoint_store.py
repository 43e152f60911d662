"""The checkpoint store in one process with real files and real torch.distributed.checkpoint I/O (no process
group: DCP's single-process mode), and a phase hook that holds a background save at a chosen phase.

Multi-rank behaviour (FSDP2, resharding, kills, preemption) is in tests/runtime/checkpoint/test_sharded_checkpoint.py.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from slurmgen.job_context.context import JobContext
from slurmgen.runtime.checkpoint import layout
from slurmgen.runtime.checkpoint.background import PendingSave
from slurmgen.runtime.checkpoint.commit import CheckpointError
from slurmgen.runtime.checkpoint.dcp_io import BEFORE_COMMIT
from slurmgen.runtime.checkpoint.record import SaveRecord
from slurmgen.runtime.checkpoint.settings import StoreSettings
from slurmgen.runtime.checkpoint.store import CheckpointStore
from slurmgen.runtime.peers import Peers

pytestmark = pytest.mark.torch


def make_store(tmp_path: Path, *, key: str = "77", named: bool = False, keep: int = 2, **kw: Any) -> CheckpointStore:
    def exit_(code: int) -> None:
        raise AssertionError(f"exit({code}) in a single process")

    settings = StoreSettings(key, "abc", 0, keep, named=named)
    on_failure = kw.pop("on_failure", None)
    listener = None if on_failure is None else FailureListener(on_failure)
    return CheckpointStore(
        str(tmp_path / "77.state"),
        settings,
        Peers(JobContext.from_environ({}), timeout=60.0, exit=exit_),
        listener=listener,
        **kw,
    )


class FailureListener:
    """Hands each failed save to `on_failure(line, background)`."""

    def __init__(self, on_failure: Any) -> None:
        self.on_failure = on_failure

    def saved(self, saved: SaveRecord) -> None:
        pass

    def save_failed(self, error: str, background: bool) -> None:
        self.on_failure(error, background)


class Gate:
    """A phase hook that holds every save at `phase` until opened."""

    def __init__(self, phase: str) -> None:
        self.phase, self.reached, self.open = phase, threading.Event(), threading.Event()

    def __call__(self, name: str) -> None:
        if name == self.phase:
            self.reached.set()
            assert self.open.wait(60)


def test_background_save_is_reported_only_once_committed(tmp_path: Path, torch_module: Any) -> None:
    torch = torch_module
    gate = Gate(BEFORE_COMMIT)
    store = make_store(tmp_path, phase=gate)
    state = {"w": torch.arange(1000.0), "step": 3}
    pending = store.save(state, "periodic", async_=True, sharded=True)
    assert isinstance(pending, PendingSave)
    state["w"] += 1  # training goes on while the copy is written
    assert gate.reached.wait(60)
    # Every shard and the metadata are on disk, but the directory is not committed: nothing says durable yet.
    assert not pending.done() and store.last is None
    assert layout.complete_dirs(str(tmp_path), "77.state") == []
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    gate.open.set()
    record = pending.wait(60)
    assert isinstance(record, SaveRecord)
    assert record.path == str(tmp_path / "77.state.000001") and record.kind == "sharded"
    assert record.size_bytes == layout.tree_size(record.path) > 4000
    assert 0 < record.blocked_s < record.duration_s
    assert store.last == record
    into = {"w": torch.zeros(1000), "step": 0}
    assert store.load(into) is True
    assert torch.equal(into["w"], torch.arange(1000.0)) and into["step"] == 3  # the state of the call


def test_a_second_save_waits_for_the_first(tmp_path: Path, torch_module: Any) -> None:
    torch = torch_module
    gate = Gate(BEFORE_COMMIT)
    store = make_store(tmp_path, phase=gate)
    first = store.save({"w": torch.ones(10)}, "periodic", async_=True, sharded=True)
    assert gate.reached.wait(60)
    second_done = threading.Event()

    def second() -> None:
        store.save({"w": torch.full((10,), 2.0)}, "periodic", async_=False, sharded=True)
        second_done.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not second_done.wait(0.5)  # held while the first is in flight
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]) == 1  # and has not started writing
    gate.open.set()
    thread.join(60)
    assert isinstance(first, PendingSave) and first.done() and second_done.is_set()
    assert [s for s, _ in layout.complete_dirs(str(tmp_path), "77.state")] == [1, 2]
    into = {"w": torch.zeros(10)}
    assert store.load(into) and torch.equal(into["w"], torch.full((10,), 2.0))


def test_keep_the_newest_complete_checkpoints(tmp_path: Path, torch_module: Any) -> None:
    torch = torch_module
    store = make_store(tmp_path, keep=2)
    for step in range(1, 5):
        store.save({"w": torch.full((4,), float(step)), "step": step}, "periodic", async_=False, sharded=True)
    assert [s for s, _ in layout.complete_dirs(str(tmp_path), "77.state")] == [3, 4]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    into = {"w": torch.zeros(4), "step": 0}
    assert store.load(into) and into["step"] == 4


def test_a_failure_on_every_rank_keeps_the_previous_checkpoint(tmp_path: Path, torch_module: Any) -> None:
    torch = torch_module
    store = make_store(tmp_path)
    store.save({"w": torch.ones(3), "note": "good"}, "periodic", async_=False, sharded=True)
    failed = r"sharded save to .*77\.state\.000002 failed: rank 0: AttributeError: Can.t pickle"
    with pytest.raises(CheckpointError, match=failed):
        store.save({"w": torch.ones(3), "note": lambda: None}, "periodic", async_=False, sharded=True)  # unpicklable
    assert [s for s, _ in layout.complete_dirs(str(tmp_path), "77.state")] == [1]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    into: dict[str, Any] = {"w": torch.zeros(3), "note": ""}
    assert store.load(into) and into["note"] == "good"


def test_plain_state_async_and_filled_in_place(tmp_path: Path, torch_module: Any) -> None:
    torch = torch_module
    store = make_store(tmp_path)
    model = torch.nn.Linear(3, 2)
    state = {"model": model.state_dict(), "step": 7, "extra": {"lr": 0.5}}
    pending = store.save(state, "periodic", async_=True, sharded=None)  # plain: no DTensor, no Stateful
    assert isinstance(pending, PendingSave)
    record = pending.wait(60)
    assert record is not None and record.kind == "plain" and record.path == str(tmp_path / "77.state")
    assert record.size_bytes == (tmp_path / "77.state").stat().st_size
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    fresh = torch.nn.Linear(3, 2)
    into = {"model": fresh, "step": 0, "extra": {"lr": 0.1}}  # a Stateful module is filled with load_state_dict
    assert store.load(into) is True
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in expected.items())
    assert into["step"] == 7 and into["extra"] == {"lr": 0.5}
    plain = store.load()
    assert plain["step"] == 7


def test_a_sharded_checkpoint_needs_a_target(tmp_path: Path, torch_module: Any) -> None:
    make_store(tmp_path).save({"w": torch_module.ones(2)}, "periodic", async_=False, sharded=True)
    with pytest.raises(CheckpointError, match=r"is a sharded checkpoint: give the state to fill, pre.load\(into"):
        make_store(tmp_path).load()


def test_nothing_to_resume(tmp_path: Path, torch_module: Any) -> None:
    store = make_store(tmp_path)
    assert store.load() is None
    assert store.load(into={"w": torch_module.zeros(1)}) is False


@pytest.mark.parametrize("sharded", [True, False])
def test_another_jobs_state_named_path_resumes_default_refuses(
    tmp_path: Path, torch_module: Any, capsys: pytest.CaptureFixture[str], sharded: bool
) -> None:
    torch = torch_module
    make_store(tmp_path, key="77").save({"w": torch.ones(2)}, "preemption", async_=False, sharded=sharded)
    capsys.readouterr()
    into = {"w": torch.zeros(2)}
    assert make_store(tmp_path, key="88", named=False).load(into) is False
    refused = capsys.readouterr().err
    assert "not resuming from" in refused and "it belongs to job 77 with spec abc, this is job 88" in refused
    assert make_store(tmp_path, key="88", named=True).load(into) is True
    line = capsys.readouterr().err.strip()
    assert line.count("\n") == 0 and line.startswith("slurmgen: resuming from")
    assert "cause preemption); it is the state of job 77 with spec abc, this is job 88 with spec abc" in line
    assert torch.equal(into["w"], torch.ones(2))


def test_newest_of_plain_and_sharded_wins(tmp_path: Path, torch_module: Any) -> None:
    torch = torch_module
    store = make_store(tmp_path)
    store.save({"w": torch.ones(2)}, "periodic", async_=False, sharded=True)
    store.save({"w": torch.full((2,), 5.0)}, "periodic", async_=False, sharded=False)
    into = {"w": torch.zeros(2)}
    assert store.load(into) and torch.equal(into["w"], torch.full((2,), 5.0))


FAILING_FINAL_SAVE = """
import os, sys, torch
from slurmgen.runtime import Preemption
pre = Preemption(path=os.path.join(sys.argv[1], "x.state"))
pre.save({"model": torch.nn.Linear(2, 2), "step": 1})  # a Stateful: sharded, in DCP's one-process mode
pre.request("save", "requeue", "exit")
assert pre.should_stop()
pre.save_and_exit({"model": torch.nn.Linear(2, 2), "step": 2, "bad": lambda: None})  # cannot be pickled
"""


def test_a_final_save_that_fails_everywhere_still_requeues_and_exits(tmp_path: Path, torch_module: Any) -> None:
    """A full disk at the stop: the previous checkpoint stays, the requeue still happens, the exit is clean."""
    import subprocess
    import sys

    from runtime.runtime_helpers import base_env

    done = subprocess.run(
        [sys.executable, "-c", FAILING_FINAL_SAVE, str(tmp_path)],
        env=base_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "x.state.000002 failed: rank 0: " in done.stderr
    assert "the previous checkpoint stays" in done.stderr
    assert "not inside a Slurm job: nothing to requeue" in done.stderr  # the requeue step ran
    assert [s for s, _ in layout.complete_dirs(str(tmp_path), "x.state")] == [1]


def test_background_saves_reuse_their_buffers_without_mixing_checkpoints(tmp_path: Path, torch_module: Any) -> None:
    """The stager copies into the buffers of the previous save: each checkpoint still holds its own values."""
    from slurmgen.runtime.checkpoint import dcp_io

    torch = torch_module
    store = make_store(tmp_path, keep=5)
    weights = torch.zeros(1000)
    for value in (1.0, 2.0, 3.0):
        weights.fill_(value)
        pending = store.save({"w": weights}, "periodic", async_=True, sharded=True)
        weights.fill_(-1.0)  # training goes on before the write is done
        assert isinstance(pending, PendingSave) and pending.wait(60) is not None
    for seq, path in layout.complete_dirs(str(tmp_path), "77.state"):
        into = {"w": torch.zeros(1000)}
        dcp_io.read(into, path, None)
        assert torch.equal(into["w"], torch.full((1000,), float(seq)))


def test_a_resumed_forgotten_job_starts_from_the_old_jobs_sharded_state(
    tmp_path: Path, torch_module: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`slurmgen resume` submits the script again as a new job with SLURMGEN_RESUME_FROM=<old key>: with no
    state of its own, it starts from the old job's newest checkpoint, then saves under its own key."""
    torch = torch_module
    alone = Peers(JobContext.from_environ({}), timeout=60.0, exit=lambda c: None)
    old = CheckpointStore(str(tmp_path / "77.state"), StoreSettings("77", "abc", 0, 2), alone)
    old.save({"w": torch.full((3,), 7.0)}, "preemption", async_=False, sharded=True)
    new = CheckpointStore(str(tmp_path / "91.state"), StoreSettings("91", "abc", 0, 2, resume_from="77"), alone)
    capsys.readouterr()
    into = {"w": torch.zeros(3)}
    assert new.load(into) is True and torch.equal(into["w"], torch.full((3,), 7.0))
    assert "77.state.000001 (sharded over 1 ranks, job 77's state, saved by run 1" in capsys.readouterr().err
    record = new.save(into, "periodic", async_=False, sharded=True)
    assert isinstance(record, SaveRecord) and record.path == str(tmp_path / "91.state.000001")


PLAIN_SAVE_PROBE = """
import sys, torch
from pathlib import Path
from slurmgen.runtime.checkpoint.settings import StoreSettings
from slurmgen.runtime.checkpoint.store import CheckpointStore
from slurmgen.runtime.peers import Peers
from slurmgen.job_context.context import JobContext
model = torch.nn.Linear(3, 2)
store = CheckpointStore(str(Path(sys.argv[1]) / "77.state"), StoreSettings("77", "abc", 0, 2, named=False),
                        Peers(JobContext.from_environ({}), timeout=60.0, exit=sys.exit))
store.save({"model": model.state_dict(), "step": 7}, "preemption", async_=False, sharded=None)
into = {"model": torch.nn.Linear(3, 2).state_dict(), "step": 0}
assert store.load(into) and into["step"] == 7 and torch.equal(into["model"]["weight"], model.weight.detach())
print(sorted(m for m in sys.modules if m.startswith("torch.distributed.checkpoint")))
"""


def test_a_plain_save_and_its_load_never_import_torch_distributed_checkpoint(tmp_path: Path) -> None:
    """A plain state (tensors, numbers; no Stateful object, no DTensor) is written with torch.save: its first save,
    often the preemption's inside a grace time, must not pay for importing torch.distributed.checkpoint (2.9 s of
    CPU per rank: sympy and the default planner). Checked in a fresh interpreter, after a real save and load."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", PLAIN_SAVE_PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
    assert (tmp_path / "77.state").exists()


def test_the_stateful_check_agrees_with_torchs_protocol(torch_module: Any) -> None:
    """state_tree.stateful is isinstance(x, torch.distributed.checkpoint.stateful.Stateful) without the import."""
    from torch.distributed.checkpoint.stateful import Stateful

    from slurmgen.runtime.checkpoint.state_tree import stateful

    model = torch_module.nn.Linear(2, 2)

    class Half:
        def state_dict(self) -> dict[str, Any]:
            return {}

    samples = [model, torch_module.optim.SGD(model.parameters(), lr=0.1), model.weight, {"a": 1}, Half(), 3, None]
    assert [stateful(s) for s in samples] == [isinstance(s, Stateful) for s in samples] == [
        True, True, False, False, False, False, False,
    ]  # fmt: skip
