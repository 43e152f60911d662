"""Sharded checkpoints with real rank processes: FSDP2 (fully_shard over build_mesh) on CPU with gloo, real
signals, real SIGKILLs, real files. The worker is tests/runtime/fsdp_worker.py; `scontrol` is a recording
stand-in (the cluster tests use the real one).

Weights are compared by a SHA-256 over the full gathered model and AdamW state, printed by rank 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ranks import Launcher, Ranks, recording_scontrol

from runtime.runtime_helpers import base_env, free_port
from slurmgen import contract, exit_codes
from slurmgen.runtime.checkpoint import layout

pytestmark = [pytest.mark.torch, pytest.mark.slow]

WORKER = Path(__file__).parents[1] / "fsdp_worker.py"  # tests/runtime/
MESHES = {"fsdp": (), "hsdp": ("--replicate", "2")}  # dp_shard=4, and dp_replicate=2 x dp_shard=2


class Sharded(Ranks):
    """A launch of fsdp_worker.py ranks."""

    def saved_hashes(self) -> dict[int, str]:
        return {int(w[1]): w[2] for w in (line.split() for line in self.out().splitlines()) if w[0] == "SAVED"}


Launch = Callable[..., Sharded]


@pytest.fixture()
def launch(tmp_path: Path, launcher: Launcher) -> Iterator[Launch]:
    bindir = tmp_path / "bin"
    recording_scontrol(bindir)

    def start(world: int, *args: str, env: dict[str, str] | None = None) -> Sharded:
        ranks = launcher.add(Sharded(launcher.next_dir()))
        port = str(free_port())
        for rank in range(world):
            full = base_env(
                PATH=f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin",
                SCONTROL_CALLS=str(ranks.dir / "scontrol.calls"),
                SLURM_JOB_ID="77", SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_NTASKS=str(world),
                SLURM_JOB_NODELIST="localhost", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                **{
                    contract.PREEMPT_SIGNAL: "USR1", contract.STATE_DIR: str(tmp_path / "state"),
                    contract.MAX_REQUEUES: "3", contract.SPEC_HASH: "abc", contract.BARRIER_TIMEOUT: "60",
                },
            )  # fmt: skip
            full.update(env or {})
            ranks.start([sys.executable, "-m", "slurmgen.task", "--", sys.executable, str(WORKER), *args], full)
        return ranks

    yield start


def complete(state_dir: Path) -> list[int]:
    return [seq for seq, _ in layout.complete_dirs(str(state_dir), "77.state")]


def leftovers(state_dir: Path) -> list[str]:
    return [p.name for p in state_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("mesh", sorted(MESHES))
def test_preempted_fsdp_run_resumes_bit_identical(launch: Launch, tmp_path: Path, mesh: str) -> None:
    """Four ranks train with a background save after every step; one rank gets the preemption signal; the
    final save waits for the one in flight, the job requeues itself once, and the next run resumes from the
    sharded checkpoint and ends with exactly the weights and optimizer state of a run that never stopped."""
    steps = ("--steps", "24", *MESHES[mesh])
    reference = launch(4, *steps)
    assert reference.wait() == [0, 0, 0, 0], reference.err()[-3000:]
    expected = reference.line("DONE")[2]

    first = launch(4, *steps, "--save-every", "1", "--async-save", "--step-time", "0.1")
    first.wait_for("STEP 6")
    # One rank hears it (as slurmstepd signals a task: every process of it, its supervisor and the program); all
    # stop at the same step.
    os.killpg(first.procs[2].pid, signal.SIGUSR1)
    assert first.wait() == [0, 0, 0, 0], [first.err(r)[-2000:] for r in range(4)]
    stop = first.line("STOP")
    assert {first.line("STOP", r)[1] for r in range(4)} == {stop[1]}
    assert first.calls() == ["requeue Incomplete 77"]
    assert "(sharded over 4 ranks, " in first.err() and ", preemption)" in first.err()
    assert len(complete(tmp_path / "state")) == 2  # keep=2 (SLURMGEN_KEEP unset)

    second = launch(4, *steps, "--save-every", "5", env={"SLURM_RESTART_COUNT": "1"})
    assert second.wait() == [0, 0, 0, 0], second.err()[-3000:]
    assert second.line("RESUMED")[1:] == stop[1:]  # the step and the full state of the stop
    assert "(sharded over 4 ranks, saved by run 1, cause preemption)" in second.err()
    assert second.line("DONE")[2] == expected


def test_four_ranks_save_two_and_six_load_the_same_values(launch: Launch, tmp_path: Path) -> None:
    """DCP resharding: a checkpoint of 4 FSDP2 ranks, loaded by 2 and by 6 (uneven and empty shards of the
    8-row output layer), gives the same full model and optimizer values, tensor by tensor. The later jobs have
    other ids and another spec: at the path they name they resume, saying whose state it is; at their default
    location (a plain restart of job 77 with another spec) they do not."""
    import torch

    state = tmp_path / "state"
    dumps = {world: tmp_path / f"full{world}.pt" for world in (4, 2, 6)}
    saver = launch(4, "--steps", "6", "--save-every", "6", "--dump", str(dumps[4]))
    assert saver.wait() == [0] * 4, saver.err()[-3000:]
    for world, job in ((2, "88"), (6, "99")):
        loader = launch(
            world, "--steps", "0", "--path", str(state / "77.state"), "--dump", str(dumps[world]),
            env={"SLURM_JOB_ID": job, contract.SPEC_HASH: "other"},
        )  # fmt: skip
        assert loader.wait() == [0] * world, loader.err()[-3000:]
        assert loader.line("RESUMED")[1:] == ["6", saver.line("DONE")[2]]
        whose = f"it is the state of job 77 with spec abc, this is job {job} with spec other"
        assert next(line for line in loader.err().splitlines() if "resuming from" in line).endswith(whose)
    saved = torch.load(dumps[4], weights_only=True)
    for world in (2, 6):
        loaded = torch.load(dumps[world], weights_only=True)
        assert loaded["step"] == saved["step"] == 6
        assert saved["model"].keys() == loaded["model"].keys()
        for name, tensor in saved["model"].items():
            assert torch.equal(tensor, loaded["model"][name]), (world, name)
        assert saved["optim"]["state"].keys() == loaded["optim"]["state"].keys()
        for name, slots in saved["optim"]["state"].items():
            for slot in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(slots[slot], loaded["optim"]["state"][name][slot]), (world, name, slot)
    refused = launch(2, "--steps", "0", env={contract.SPEC_HASH: "different"})
    assert refused.wait() == [0, 0]
    assert "RESUMED" not in refused.out()
    assert "belongs to job 77 with spec abc, this is job 77 with spec different" in refused.err()


KILLS = [
    ("shards-written@1", False),  # a rank's shards are durable, the metadata is not written
    ("metadata-written@0", False),  # DCP's .metadata is durable, the directory is not committed
    ("before-commit@0", False),  # the marker too; the rename has not happened
    ("after-commit@0", False),  # renamed: the new checkpoint is complete, the old ones are still there
    ("shards-written@0", True),  # the same kills on the background thread of an async save
    ("before-commit@0", True),
]


@pytest.mark.parametrize(("phase", "background"), KILLS)
def test_a_kill_at_each_phase_of_a_save_keeps_a_complete_checkpoint(
    launch: Launch, tmp_path: Path, phase: str, background: bool
) -> None:
    state = tmp_path / "state"
    victim = int(phase.split("@")[1])
    args = ["--steps", "40", "--save-every", "2", "--report-saves", "--step-time", "0.05"]
    run = launch(2, *args, *(["--async-save"] if background else []), "--kill-at", f"{phase}#2")
    codes = run.wait()
    assert codes[victim] == -signal.SIGKILL
    # The survivor leaves at once with one line, not after the process-group timeout (600 s): from the thread that
    # found the loss first, the save's or the training loop's (whose next collective fails too).
    assert codes[1 - victim] == exit_codes.EXIT_PEER_LOST, run.err(1 - victim)[-2000:]
    last = (run.err(1 - victim).splitlines() or [""])[-1]
    assert "lost the other ranks" in last or "a peer rank died or stopped answering" in last, last
    committed = phase.startswith("after-commit")
    assert complete(state) == ([1, 2] if committed else [1])
    assert bool(leftovers(state)) is not committed
    again = launch(2, "--steps", "0")
    assert again.wait() == [0, 0], again.err()[-3000:]
    resumed = again.line("RESUMED")
    assert int(resumed[1]) == (4 if committed else 2)
    if not committed:
        assert resumed[2] == run.saved_hashes()[2]
        assert "left by a save that was interrupted" in again.err()
    assert not leftovers(state)
    if committed:  # what rank 0 committed before it died is what an uninterrupted run has after 4 steps
        reference = launch(2, "--steps", "4")
        assert reference.wait() == [0, 0]
        assert resumed[2] == reference.line("DONE")[2]


def test_a_rank_killed_at_a_random_moment_of_a_save(launch: Launch, tmp_path: Path) -> None:
    state = tmp_path / "state"
    run = launch(2, "--steps", "1000", "--save-every", "1", "--report-saves", "--width", "512", "--layers", "4")
    run.wait_for("SAVED 3")
    deadline = time.monotonic() + 60
    while not leftovers(state):
        assert time.monotonic() < deadline, "never caught a save in progress"
        time.sleep(0.002)
    os.kill(run.procs[1].pid, signal.SIGKILL)
    run.wait()
    assert leftovers(state), "the kill landed outside a save; the test proves nothing"
    again = launch(2, "--steps", "0", "--width", "512", "--layers", "4")
    assert again.wait() == [0, 0], again.err()[-3000:]
    step, digest = again.line("RESUMED")[1:]
    saved = run.saved_hashes()
    assert int(step) >= 3
    if int(step) in saved:  # rank 0 may die before printing SAVED for a checkpoint it already committed
        assert digest == saved[int(step)]
    assert not leftovers(state)


def test_the_worker_under_torchrun(tmp_path: Path) -> None:
    """torchrun's workers (the agent's store, TORCHELASTIC_USE_AGENT_STORE) save and resume sharded."""
    env = base_env(**{contract.STATE_DIR: str(tmp_path / "state"), "SLURM_JOB_ID": "55"})
    # Only rank 0's output: two workers printing to one pipe can merge lines (a print is two writes), which hid
    # rank 0's DONE line from this test twice in CI.
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
            "--local-ranks-filter=0", str(WORKER)]  # fmt: skip
    digests = []
    for steps in ("6", "10"):
        done = subprocess.run(
            [*argv, "--steps", steps, "--save-every", "3"], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        # Rank 0's lines are the ones with a digest.
        lines = [line.split() for line in done.stdout.splitlines() if line.startswith(("RESUMED", "DONE"))]
        digests.append([words for words in lines if len(words) == 3 and words[2] != "-"])
    assert digests[1][0][:2] == ["RESUMED", "6"]
    assert digests[1][0][2] == digests[0][-1][2]
    assert (tmp_path / "state" / "55.state.000003").is_dir()  # 6 / 3 + the run to 10 saved at 9


@pytest.mark.gpu
def test_fsdp2_with_nccl_on_cuda_resumes_bit_identical(launch: Launch, tmp_path: Path) -> None:
    """The same preempt-and-resume with the production backend: NCCL on CUDA, one rank per GPU (up to 4; a
    one-GPU machine runs one rank, which still exercises DCP's CUDA path and NCCL's process group)."""
    import torch

    world = min(torch.cuda.device_count(), 4)
    nccl = {contract.BACKEND: "nccl"}
    steps = ("--steps", "24")
    reference = launch(world, *steps, env=nccl)
    assert reference.wait() == [0] * world, reference.err()[-3000:]
    expected = reference.line("DONE")[2]
    first = launch(world, *steps, "--save-every", "2", "--step-time", "0.1", env=nccl)
    first.wait_for("STEP 6")
    os.killpg(first.procs[world - 1].pid, signal.SIGUSR1)  # as slurmstepd signals a task: its supervisor and program
    assert first.wait() == [0] * world, [first.err(r)[-2000:] for r in range(world)]
    stop = first.line("STOP")
    second = launch(world, *steps, env={**nccl, "SLURM_RESTART_COUNT": "1"})
    assert second.wait() == [0] * world, second.err()[-3000:]
    assert second.line("RESUMED")[1:] == stop[1:]
    assert f"(sharded over {world} rank" in second.err()
    assert second.line("DONE")[2] == expected
