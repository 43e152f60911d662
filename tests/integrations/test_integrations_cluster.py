"""The framework adapters on the real 3-node Slurm: the rendered job of each example program (2 nodes x 2
ranks, gloo) submitted with sbatch, preempted once with `scancel --batch --signal=USR1` (what `--signal=B:` and
the scheduler's preemption send), requeued once by the runtime, resumed from the framework's own checkpoint, and
ending with the weights of the uninterrupted run (the local reference: same four ranks, same arithmetic).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from slurm_versions import ANY

from slurmgen.script.render import render
from slurmgen.spec.load import load_text

from .integration_helpers import (
    FINAL,
    FRAMEWORKS,
    PAUSE_AT,
    PAUSING,
    SAVED,
    START,
    STEP_TIME,
    check_history,
    check_preempted_once,
    job_logs,
    needs,
    spec_text,
)

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

# What the adapters do is the same on every Slurm: these long tests run once, beside the primary version's worker
pytestmark = [pytest.mark.slurm, pytest.mark.torch, pytest.mark.slurm_versions(ANY)]
FIRST_START = re.compile(r"rank \d/\d: start at step 0, ")  # START of a first run


def wait_for_lines(out: Path, framework: str, job: str, line: re.Pattern[str], count: int, timeout: float) -> None:
    """Until the job's logs hold ``count`` matches of ``line``."""
    deadline = time.monotonic() + timeout
    while len(line.findall(job_logs(out, framework, job))) < count:
        assert time.monotonic() < deadline, job_logs(out, framework, job)[-4000:]
        time.sleep(0.2)


def wait_for_starts(out: Path, framework: str, job: str, count: int, timeout: float = 240) -> None:
    wait_for_lines(out, framework, job, FIRST_START, count, timeout)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_preempted_on_the_cluster_resumes_from_the_frameworks_checkpoint_to_the_same_weights(
    framework: str,
    reference: Callable[[str], tuple[str, float]],
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
) -> None:
    needs(framework)
    digest, _ = reference(framework)
    spec = load_text(spec_text(framework, tmp_path, step_time=STEP_TIME), "test.yaml").spec
    script = tmp_path / "job.sbatch"
    script.write_text(render(spec))
    (tmp_path / "logs").mkdir()
    job = str(slurm_cluster.submit(script))
    wait_for_starts(tmp_path, framework, job, 4)  # every rank is at its first step
    time.sleep(3)  # about 10 steps in (of 30 s of steps): a stop in the middle of training
    result = slurm_cluster.run(["scancel", "--batch", "--signal=USR1", job])
    assert result.returncode == 0, result.stderr
    slurm_cluster.wait_for(job, lambda i: i.restarts >= 1 and i.state.name == "RUNNING", timeout=180)
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    logs = job_logs(tmp_path, framework, job)
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 1, 0), logs[-4000:]
    assert logs.count("batch shell received SIGUSR1") == 1
    check_preempted_once(logs, digest)
    # No scheduler preemption set PreemptTime: a user signal alone is the job's own request (slurmgen/requeue.py).
    check_history(tmp_path / "logs" / f"{framework}-{job}", "requested")
    assert re.search(rf"job {job}, run 2,", logs)
    if framework == "lightning":  # Lightning's own SLURM handler never acted: no save, no requeue of its own
        assert "auto-requeue" not in logs and "requeing job" not in logs
        assert not list(tmp_path.rglob("hpc_ckpt_*.ckpt"))


def test_lightnings_own_auto_requeue_works_under_handler_program(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """No slurmgen adapter: Lightning's SLURMEnvironment (auto_requeue) handles USR1 itself, saves its hpc
    checkpoint and requeues the job with scontrol; the next run resumes from that checkpoint. Under handler: program
    the program used to start with USR1 ignored, so Lightning saw a handler, installed none, and nothing happened.
    The signal goes while every rank pauses in the same step: Lightning's handler saves with a barrier wherever the
    rank is, so ranks signalled a step apart would hang (tests/integrations/data/train_lightning.py)."""
    needs("lightning")
    framework = "lightning_native"
    text = spec_text(framework, tmp_path, step_time=STEP_TIME)
    text = text.replace("preemption: {max_requeues: 3}", "preemption: {handler: program}")
    script = tmp_path / "job.sbatch"
    script.write_text(render(load_text(text, "test.yaml").spec))
    (tmp_path / "logs").mkdir()
    job = str(slurm_cluster.submit(script))
    wait_for_starts(tmp_path, framework, job, 4)
    # every rank inside the same step, well after Lightning installed its handlers
    wait_for_lines(tmp_path, framework, job, PAUSING, 4, timeout=120)
    result = slurm_cluster.run(["scancel", "--batch", "--signal=USR1", job])
    assert result.returncode == 0, result.stderr
    info = slurm_cluster.wait_for(job, lambda i: i.restarts >= 1 and i.state.is_terminal, timeout=300)
    logs = job_logs(tmp_path, framework, job)
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 1, 0), logs[-4000:]
    assert "Handling auto-requeue signal" in logs and f"Requeued SLURM job: {job}" in logs, logs[-4000:]
    assert list(tmp_path.rglob("hpc_ckpt_*.ckpt")), logs[-4000:]  # Lightning's own checkpoint
    saves = SAVED.findall(logs)
    assert len(saves) == 1, logs[-4000:]
    step, saved = saves[0]
    assert step == str(PAUSE_AT) and len(PAUSING.findall(logs)) == 4, logs[-4000:]  # no pause in the resumed run
    resumed = [s for s in START.findall(logs) if s[2] != "0"]
    assert {(s[0], s[2], s[3]) for s in resumed} == {(str(r), step, saved) for r in range(4)}, logs[-4000:]
    assert len(FINAL.findall(logs)) == 4
    assert "requeue issued" not in logs  # Lightning requeued the job, not slurmgen
