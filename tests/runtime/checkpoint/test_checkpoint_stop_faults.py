"""The stop's save under a full disk, with two real rank processes (gloo), real signals and a real 1 MiB tmpfs
as the state directory. The launcher and its recording `scontrol` are test_preemption.py's."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from runtime.test_preemption import Job, launch  # noqa: F401 - the fixture
from slurmgen import run_history

from .test_checkpoint_faults import fill

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def test_a_stop_save_on_a_full_disk_keeps_the_previous_state_requeues_and_tells_every_rank(
    launch: Any,  # noqa: F811 - test_preemption's fixture
    small_tmpfs: Path,
    tmp_path: Path,
) -> None:
    hold = tmp_path / "hold"
    hold.touch()  # every rank waits before its first stop check: the test fills the disk meanwhile
    job: Job = launch(world=2, args=("--save-every", "1000", "--state-mb", "0.2", "--hold-file", str(hold)))
    for rank in (0, 1):
        job.wait_for("HELD", rank)
    assert "SAVED 0" in job.out(0)
    saved = (small_tmpfs / "77.state").read_bytes()
    fill(small_tmpfs)
    job.signal(signal.SIGUSR1, rank=0)
    job.wait_for("GOT rank=0 USR1", 0)
    hold.unlink()
    assert job.wait() == [0, 0], job.err(0)[-3000:]
    # rank 0: one line naming the cause, then the requeue as planned.
    failed = [line for line in job.err(0).splitlines() if "failed: the disk is full" in line]
    assert len(failed) == 1 and failed[0].startswith(f"slurmgen: saving the state to {small_tmpfs / '77.state'}")
    assert failed[0].endswith("; the previous state stays")
    assert "Traceback" not in job.err(0) and "inline_container" in failed[0]
    assert job.calls() == ["requeue Incomplete 77"]
    # rank 1 is told the truth, not a timeout.
    assert "rank 1: rank 0 could not save the state at the stop: saving the state to" in job.err(1)
    assert "did not finish its save" not in job.err(1)
    # The previous complete state is kept, byte for byte, and the failure is in the run history.
    assert (small_tmpfs / "77.state").read_bytes() == saved
    events = run_history.read(str(tmp_path / "logs"))
    (event,) = [e for e in events if e["event"] == run_history.SAVE_FAILED]
    assert "the disk is full" in event["error"] and event["background"] is False
    (run,) = job.history()
    assert (run.cause, run.requeued_by) == ("requested", "rank0")
