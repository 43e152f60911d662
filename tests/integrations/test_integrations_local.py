"""The framework adapters under `slurmgen run --local`: real Lightning, 2 emulated nodes x 2 ranks on gloo,
preempted once (USR1 to every task, even before the adapter exists), requeued once, resumed from the framework's
own checkpoint, and ending with the same final weights as the uninterrupted run, bit for bit.

The whole preemption of each framework (`--preempt-after` through the batch shell, the requeue, the resume, the
same weights) runs on the real cluster (test_integrations_cluster.py, all three frameworks): each framework's run
and its reference cost 2-4 minutes of a CPU-bound CI, the adapter does not know a local run from a cluster's, and
the local rehearsal itself is tested with plain programs (tests/local/test_local_run.py). Here Lightning runs to
the end once, under the hardest timing; accelerate-on-CPU runs its framework here too.

"Same" is exact here because nothing in a resumed run differs from the uninterrupted one: each step's data is a
function of the step (and rank), the framework's checkpoint restores weights, optimizer and step counter exactly
(float32 written and read back), the tiny model has a single parameter tensor (DDP sums it in one bucket, in the
same order before and after a resume: docs/runtime-internals.md, "Bit-identical resumes with DDP"), and gloo's
all-reduce adds the four ranks' gradients in a fixed order.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from slurmgen.local import procs

from .integration_helpers import (
    DATA,
    START,
    check_preempted_once,
    finish_local,
    needs,
    run_local,
    start_local,
)

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def signal_mask(pid: int, field: str) -> int:
    """A signal mask of /proc/<pid>/status (SigBlk: blocked, SigCgt: caught, ShdPnd: pending), 0 if gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(rf"^{field}:\s*([0-9a-f]+)$", text, re.M)
    return int(found[1], 16) if found else 0


def argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace").split("\0")
    except OSError:
        return []


def test_a_signal_before_the_callback_exists_is_kept_not_fatal(
    reference: Callable[[str], tuple[str, float]], tmp_path: Path
) -> None:
    """USR1 straight to every task (as `scancel --signal=USR1` does) while they still import torch and Lightning,
    before the callback exists: blocked by the entry point, it stays pending until the callback's Preemption
    unblocks it, and the run stops at its first step boundary instead of dying of it."""
    digest, _ = reference("lightning")
    program = str(DATA / "train_lightning.py")
    started = time.monotonic()
    proc = start_local("lightning", tmp_path)  # no sleep per step: the signal comes before the first step
    usr1 = 1 << (signal.SIGUSR1 - 1)
    try:
        tasks: list[int] = []
        while len(tasks) < 4:
            assert proc.poll() is None and time.monotonic() - started < 120, (tmp_path / "runner.err").read_text()
            time.sleep(0.1)  # each look reads every /proc/PID/stat; the window is an import of torch and Lightning
            pgid = re.search(r"process group (\d+)", (tmp_path / "runner.err").read_text())
            members = procs.group_members(int(pgid[1])) if pgid else []
            tasks = [pid for pid in members if argv(pid)[1:2] == [program]]  # the entry point exec'd the program
        # The entry point blocked the signal before exec; the program has not installed a handler yet.
        early = [pid for pid in tasks if signal_mask(pid, "SigBlk") & usr1 and not signal_mask(pid, "SigCgt") & usr1]
        assert len(early) == 4, "the tasks were ready before the test could signal them"
        for pid in tasks:
            os.kill(pid, signal.SIGUSR1)
        # Pending and blocked, not acted on (a task would have died of it: USR1's default action).
        assert all(signal_mask(pid, "SigBlk") & usr1 for pid in tasks)
    finally:
        run = finish_local(proc, "lightning", tmp_path, started)
    assert run.code == 0, run.runner + run.logs[-4000:]
    assert "COMPLETED, exit code 0, 2 runs in" in run.runner
    step = check_preempted_once(run.logs, digest)
    assert step == 1
    assert run.runner.count(f"requeue requested (scontrol requeue Incomplete {run.job}, from pid ") == 1  # once
    # slurmgen's resume state named Lightning's checkpoint (run 2 resumed from it); the job then completed, so its
    # batch shell removed that state (docs/preemption.md, "A completed job's state is removed"), not the checkpoint.
    checkpoint = tmp_path / "logs" / "state" / f"{run.job}.lightning" / f"run1-step={step}.ckpt"
    assert checkpoint.exists() and f"resuming from the checkpoint {checkpoint}" in run.logs
    state = tmp_path / "logs" / "state" / f"{run.job}.state"
    assert not state.exists() and f"the job completed: removed its resume state {state}" in run.logs
    # Lightning's own SLURM handler never acted: no save, no requeue of its own
    assert "auto-requeue" not in run.logs and "requeing job" not in run.logs
    assert not list(tmp_path.rglob("hpc_ckpt_*.ckpt"))


def test_without_accelerate_use_cpu_each_rank_trains_alone(tmp_path: Path) -> None:
    """Why the entry point sets ACCELERATE_USE_CPU in a job without GPUs: set to false, accelerate makes no
    process group on a CPU and the four ranks each train a model of their own, silently."""
    needs("accelerate")
    run = run_local("accelerate", tmp_path, env=", ACCELERATE_USE_CPU: 'false'")
    assert run.code == 0, run.runner + run.logs[-4000:]
    assert [(rank, world) for rank, world, _, _ in START.findall(run.logs)] == [("0", "1")] * 4
