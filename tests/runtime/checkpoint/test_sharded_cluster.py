"""The mesh world end to end on the real cluster: an FSDP2 model over build_mesh(dp_shard=4), and an HSDP one over
dp_replicate=2 x dp_shard=2, trained on CPU with gloo by 2 nodes x 2 ranks, preempted, requeued once and resumed
from its sharded checkpoint, ending with the weights and optimizer state of an uninterrupted run (a SHA-256 over
the full gathered state, printed by rank 0 of tests/runtime/fsdp_worker.py). One with srun and a real scheduler
preemption (REQUEUE with a grace time: SIGTERM to the tasks), one with torchrun and the preemption signal."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from conftest import SlurmCluster
from slurm_versions import Preemption

from runtime.cluster_jobs import PY, job_history, logs, submit, wait_for_text
from slurmgen.slurm.ids import JobState

pytestmark = [pytest.mark.slurm, pytest.mark.torch]

WORKER = Path(__file__).parents[1] / "fsdp_worker.py"  # tests/runtime/
NODES = "node1,node2"
STEPS = 80


def spec(out: Path, name: str, *, launcher: str, replicate: int = 0, partition: str | None = None) -> str:
    args = [PY, str(WORKER), "--steps", str(STEPS), "--save-every", "20", "--step-time", "0.1"]
    args += ["--replicate", str(replicate)] if replicate else []
    shape = "launcher: torchrun\nnproc_per_node: 2\n" if launcher == "torchrun" else "tasks_per_node: 2\n"
    return (
        f"name: {name}\ncommand: {args!r}\ntime: '00:10:00'\nnodes: 2\n{shape}cpus_per_task: 1\npython: {PY}\n"
        f"output: {out}/logs\ndistributed: {{backend: gloo, timeout: 120, barrier_timeout: 60}}\n"
        + (f"partition: {partition}\n" if partition else "")
    )


def done_hash(text: str) -> str:
    found: list[str] = re.findall(r"DONE \d+ ([0-9a-f]{16})", text)
    assert len(found) == 1, text[-3000:]
    return found[0]


def run_uninterrupted(cluster: SlurmCluster, tmp: Path, launcher: str, replicate: int) -> str:
    name = f"ref-{launcher}"
    job = submit(cluster, tmp, spec(tmp, name, launcher=launcher, replicate=replicate).replace("'0.1'", "'0'"))
    info = cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    assert info.state is JobState.COMPLETED, logs(tmp, name, job)[-3000:]
    return done_hash(logs(tmp, name, job))


def check_resumed(cluster: SlurmCluster, tmp: Path, name: str, job: str, reference: str) -> str:
    info = cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=400)
    text = logs(tmp, name, job)
    assert info.state is JobState.COMPLETED and info.restarts == 1, text[-3000:]
    stop = re.findall(r"STOP (\d+) ([0-9a-f]{16})", text)
    resumed = re.findall(r"RESUMED (\d+) ([0-9a-f]{16})", text)
    assert len(stop) == 1 and resumed == stop, text[-3000:]  # rank 0 loads exactly what the stop saved
    assert "(sharded over 4 ranks" in text  # the resume came from the sharded checkpoint
    assert done_hash(text) == reference  # as if never interrupted
    return text


def test_fsdp2_over_a_dp_shard_mesh_is_preempted_by_the_scheduler_and_resumes_bit_identical(
    slurm_cluster: SlurmCluster, slurm_preemption: Preemption, tmp_path: Path
) -> None:
    reference = run_uninterrupted(slurm_cluster, tmp_path, "srun", 0)
    name = "fsdp-srun"
    text = spec(tmp_path, name, launcher="srun", partition=slurm_preemption.requeue_grace)
    job = submit(slurm_cluster, tmp_path, text, f"--nodelist={NODES}")
    wait_for_text(tmp_path, name, job, r"SAVED 20", count=1, timeout=300)
    high = slurm_cluster.run(["sbatch", "--parsable", "-p", slurm_preemption.high, f"--nodelist={NODES}", "-N",
                              "2", "--ntasks-per-node=2", "-o", "/dev/null", "--wrap", "sleep 1"])  # fmt: skip
    assert high.returncode == 0, high.stderr
    check_resumed(slurm_cluster, tmp_path, name, job, reference)
    runs = job_history(tmp_path, name, job)
    assert (runs[0].cause, runs[0].requeued_by) == ("preemption", "rank0")
    assert runs[0].save_bytes and runs[0].save_seconds is not None


def test_hsdp_under_torchrun_is_preempted_and_resumes_bit_identical(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    reference = run_uninterrupted(slurm_cluster, tmp_path, "torchrun", 2)
    name = "hsdp-torchrun"
    job = submit(slurm_cluster, tmp_path, spec(tmp_path, name, launcher="torchrun", replicate=2))
    wait_for_text(tmp_path, name, job, r"SAVED 20", count=1, timeout=300)
    time.sleep(1)
    result = slurm_cluster.run(["scancel", "--batch", "--signal=USR1", job])
    assert result.returncode == 0, result.stderr
    check_resumed(slurm_cluster, tmp_path, name, job, reference)
    runs = job_history(tmp_path, name, job)
    assert (runs[0].cause, runs[0].requeued_by) == ("requested", "rank0")
