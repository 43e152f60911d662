"""Restart inside the allocation on the real 3-node Slurm 22.05: rendered scripts, real sbatch, srun and slurmstepd,
a real SIGKILL. The same scenarios run locally in tests/local/test_local_recovery.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SlurmCluster

from slurmgen import run_history
from slurmgen.slurm.ids import parse_sluid

from .cluster_jobs import read_log as read
from .cluster_jobs import submit_own

pytestmark = [pytest.mark.slurm, pytest.mark.torch]

STEPS = 100


def submit(cluster: SlurmCluster, tmp: Path, name: str, extra: list[str], recovery: str) -> str:
    return submit_own(cluster, tmp, name, steps=STEPS, tasks_per_node=2, recovery=recovery, extra=tuple(extra))


def test_a_killed_or_hung_rank_is_restarted_inside_the_allocation_and_ends_with_the_uninterrupted_weights(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Rank 1 SIGKILLs itself after step 50 (saves every 20): the step is started again in the same allocation
    (Slurm shows Restarts=0, COMPLETED), every rank resumes from step 40, and the final weights equal those of an
    uninterrupted run of the same program (submitted beside it). Then the same for a rank that hangs."""
    plain = submit(slurm_cluster, tmp_path, "plain", [], "false")
    hung = submit(slurm_cluster, tmp_path, "hang", ["--hang-rank", "1", "--hang-at", "50", "--hang-once",
                                                    str(tmp_path / "hung")], "{hang_timeout: 30}")  # fmt: skip
    crashed = submit(slurm_cluster, tmp_path, "crash", ["--die-rank", "1", "--die-at", "50", "--die-once",
                                                        str(tmp_path / "died")], "{max_restarts: 2}")  # fmt: skip
    info = slurm_cluster.wait_for(crashed, lambda i: i.state.is_terminal, timeout=240)
    batch = read(tmp_path, "crash", crashed, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 0, 0), batch[-3000:]
    assert re.search(r"rank 1 on \S+ \(killed by SIGKILL\) failed: restarting the step inside the allocation "
                     r"\(restart 1 of 2\)", batch), batch[-3000:]  # fmt: skip
    assert "requeue" not in batch
    ports = re.findall(r"rendezvous at \S+:(\d+)", batch)
    assert len(ports) == 2 and ports[0] != ports[1], batch[-3000:]
    for rank in range(4):
        text = read(tmp_path, "crash", crashed, f"rank-{rank}.log")
        assert re.findall(r"RESUMED (\d+) ", text) == ["40"], (rank, text[-2000:])
    reference = slurm_cluster.wait_for(plain, lambda i: i.state.is_terminal, timeout=240)
    assert reference.state.name == "COMPLETED"
    expected = re.findall(rf"DONE {STEPS} (\S+) rank=0", read(tmp_path, "plain", plain, "rank-0.log"))
    got = re.findall(rf"DONE {STEPS} (\S+) rank=0", read(tmp_path, "crash", crashed, "rank-0.log"))
    assert len(expected) == 1 and got == expected
    events = run_history.read(str(tmp_path / "logs" / f"crash-{crashed}"))
    [restart] = [e for e in events if e.get("event") == run_history.RESTART]
    assert (restart["cause"], restart["rank"], restart["run"]) == ("crash", 1, 1)
    # A rank that hangs in stuck_in_data_loader at step 50 (submitted beside them, hang_timeout 30 s): every rank's
    # stacks are written, rank 1's name the function, the step restarts within hang_timeout + 10 s of the hang,
    # and the job completes in its first run with the same final weights.
    info = slurm_cluster.wait_for(hung, lambda i: i.state.is_terminal, timeout=300)
    batch = read(tmp_path, "hang", hung, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 0, 0), batch[-3000:]
    stacks = (tmp_path / "logs" / f"hang-{hung}" / "hang" / "rank-1.stacks").read_text()
    assert "stuck_in_data_loader" in stacks, stacks
    assert "restarting the step inside the allocation (restart 1 of 3)" in batch, batch[-3000:]
    events = run_history.read(str(tmp_path / "logs" / f"hang-{hung}"))
    [restart] = [e for e in events if e.get("event") == run_history.RESTART]
    hanging = re.search(r"HANGING 50 at=(\d+\.\d+)", read(tmp_path, "hang", hung, "rank-1.log"))
    assert restart["cause"] == "hang" and hanging and float(restart["time"]) - float(hanging[1]) < 30 + 10
    got = re.findall(rf"DONE {STEPS} (\S+) rank=0", read(tmp_path, "hang", hung, "rank-0.log"))
    assert got == expected


def test_a_deterministic_bug_ends_the_job_after_two_starts_with_its_exit_code(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job = submit(slurm_cluster, tmp_path, "bug", ["--bug-at", "30"], "{}")
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=240)
    batch = read(tmp_path, "bug", job, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("FAILED", 0, 1), batch[-3000:]
    assert batch.count("rendezvous at") == 2, batch[-3000:]
    assert "failed again with the same error at the same saved state ('ValueError: bad batch at step 30')" in batch


def test_a_bug_on_rank_0_only_ends_the_job_with_its_exit_code_and_names_rank_0(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Rank 0 alone raises at step 30 on every start, of 2 nodes: its peers see the closed connection and die of
    it (exit 76, or the step's signal), often before rank 0 has finished exiting. The cause is rank 0, every time,
    so the second start repeats the first: FAILED with the program's exit code (1) after two starts."""
    job = submit(slurm_cluster, tmp_path, "bug0", ["--bug-at", "30", "--bug-rank", "0"], "{}")
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=240)
    batch = read(tmp_path, "bug0", job, "batch")
    assert (info.state.name, info.exit_code) == ("FAILED", 1), batch[-3000:]
    assert batch.count("rendezvous at") <= 2, batch[-3000:]
    assert re.search(r"rank 0 on \S+ \(exit 1\) failed again with the same error", batch), batch[-3000:]


@pytest.mark.slurm_versions("26.05")
def test_the_term_a_failed_ranks_peers_get_is_no_preemption(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Rank 1 raises at step 30 on every start. Its peers get SIGCONT, SIGTERM and SIGKILL after KillWait: from
    srun's --kill-on-bad-exit (src/srun/launch.c, SIG_TERM_KILL, on every version) and, on 26.05, from the PMI
    plugins as well (CHANGELOG/slurm-26.05.md; the chroot's 26.05 has pmi2 alone, whose TERM needs PMI2_Abort, so
    the PMIx case is emulated locally: tests/local/test_local_recovery.py). Rank 0's Preemption takes that TERM
    as a stop, a casualty's: the cause is rank 1, the job is never requeued (even with requeue_on_failure, which
    a preemption would trigger too), and it ends FAILED with the program's code."""
    job = submit_own(slurm_cluster, tmp_path, "peer", steps=STEPS, tasks_per_node=2, recovery="{}",
                     extra=("--bug-at", "30", "--bug-rank", "1"),
                     spec_lines="preemption: {requeue_on_failure: true}\n")  # fmt: skip
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    batch = read(tmp_path, "peer", job, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("FAILED", 0, 1), batch[-3000:]
    assert re.search(r"rank 1 on \S+ \(exit 1\) failed again with the same error", batch), batch[-3000:]
    assert "requeue issued" not in batch
    events = run_history.read(str(tmp_path / "logs" / f"peer-{job}"))
    assert not [e for e in events if e.get("event") in (run_history.PREEMPTED, run_history.REQUEUE)]
    # 26.05 exports SLURM_JOB_SLUID to the batch shell (src/common/env.c setup_env): the run start carries it
    (start,) = [e for e in events if e.get("event") == run_history.RUN_START]
    assert parse_sluid(start.get("sluid")) is not None, start
