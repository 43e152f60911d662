"""A tiny Lightning program (CPU, gloo, DDP over every task of the job) that survives preemption.

The slurmgen parts are the marked lines. Everything else is plain Lightning: the callback makes slurmgen's stop a
Lightning checkpoint and a requeue, and `ckpt_path()` gives the next run that checkpoint.

With `--lightning-requeue` nothing of slurmgen runs in it: Lightning's own SLURM auto-requeue does the work.
SLURMEnvironment (auto_requeue=True, its default) installs a SIGUSR1 handler that saves `hpc_ckpt_N.ckpt` in the
default root directory and runs `scontrol requeue` from rank 0; the next run resumes from that checkpoint on its
own (`ckpt_path=None` on SLURM picks the newest hpc checkpoint). It installs the handler only where
`signal.getsignal(SIGUSR1)` is SIG_DFL or None, which is what slurmgen's `handler: program` must let it see.

Each step's data comes from the global step and the rank, so a resumed run sees what an uninterrupted one would
have seen whatever the data loader does: Lightning restarts a plain DataLoader from the start of the epoch when
it resumes mid-epoch (its "dataloader is not resumable" warning); a loader with `state_dict`/`load_state_dict`
(torchdata's StatefulDataLoader) keeps its place instead.

`--pause-at STEP` holds every rank inside that step of the first run for a while, printing `pausing at step`, so
that a test can signal the ranks while all of them are in the same step. Lightning's SIGUSR1 handler saves its
checkpoint with a collective (the barrier that ends `Trainer.save_checkpoint`) from inside whatever the rank was
doing: a rank that takes the signal one step later than another runs its barrier against the other's gradient
all-reduce, and the job hangs until the process group's timeout (Lightning's default: 30 minutes). On a real
cluster the signal reaches the nodes' tasks at slightly different times too; the pause keeps the test of
slurmgen's `handler: program` from depending on that race, which is Lightning's (its handler does the whole save
inside the signal handler: https://github.com/Lightning-AI/pytorch-lightning/issues/21406, open).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time

import lightning.pytorch as L
import torch
from lightning.pytorch.plugins.environments import SLURMEnvironment
from torch.utils.data import DataLoader, TensorDataset

PAUSE = 60.0  # --pause-at: long enough for a signal to reach every rank inside it


def digest(module: torch.nn.Module) -> str:
    """The parameters' exact values (float32 widened to float64 exactly, printed round-trip), hashed."""
    text = repr([p.detach().double().flatten().tolist() for p in module.parameters()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Tiny(L.LightningModule):
    def __init__(self, step_time: float, pause_at: int | None = None) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1, bias=False)
        self.step_time = step_time
        self.pause_at = pause_at

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.global_step * 1000 + self.global_rank)
        x = torch.randn(16, 8, generator=gen)
        if self.global_step == self.pause_at:
            print(f"rank {self.global_rank}: pausing at step {self.global_step}", flush=True)
            time.sleep(PAUSE)
        time.sleep(self.step_time)
        loss: torch.Tensor = self.layer(x).pow(2).mean()
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_train_start(self) -> None:
        tag = f"rank {self.global_rank}/{self.trainer.world_size}"
        print(f"{tag}: start at step {self.global_step}, weights {digest(self)}", flush=True)

    def on_save_checkpoint(self, checkpoint: dict[str, object]) -> None:
        if self.global_rank == 0:
            print(f"rank 0: checkpoint at step {self.global_step}, weights {digest(self)}", flush=True)

    def on_train_end(self) -> None:
        print(f"rank {self.global_rank}: final weights {digest(self)} at step {self.global_step}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-time", type=float, default=0.0, help="seconds to sleep per step")
    parser.add_argument("--lightning-requeue", action="store_true", help="Lightning's own auto-requeue, no slurmgen")
    parser.add_argument("--pause-at", type=int, help=f"in the first run, every rank sleeps {PAUSE:g} s at this step")
    args = parser.parse_args()

    if args.lightning_requeue:
        preemption, handling = None, {"plugins": [SLURMEnvironment(auto_requeue=True)]}  # Lightning's SLURM default
    else:
        from slurmgen.integrations.lightning import SlurmgenPreemption  # slurmgen

        preemption = SlurmgenPreemption()  # slurmgen: first, so it holds the signals before anything slow
        handling = {"callbacks": [preemption]}
    torch.manual_seed(0)
    first_run = os.environ.get("SLURM_RESTART_COUNT", "0") == "0"
    model = Tiny(args.step_time, args.pause_at if first_run else None)
    trainer = L.Trainer(
        accelerator="cpu",
        strategy="ddp",
        devices=int(os.environ.get("SLURM_NTASKS_PER_NODE", "1")),  # Lightning checks both against Slurm's
        num_nodes=int(os.environ.get("SLURM_NNODES", "1")),
        max_steps=args.steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **handling,
    )
    data = DataLoader(TensorDataset(torch.arange(4 * args.steps)))  # a placeholder: see the module's docstring
    # slurmgen: None on the first run; with Lightning's requeue, None: Lightning resumes from its hpc checkpoint
    trainer.fit(model, data, ckpt_path=preemption.ckpt_path() if preemption else None)


if __name__ == "__main__":
    main()
