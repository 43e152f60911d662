"""A tiny Lightning program that relies on Lightning's OWN SLURM auto-requeue, with nothing of slurmgen in it.

Lightning's SLURMEnvironment (auto_requeue=True, its default) installs a SIGUSR1 handler that saves
`hpc_ckpt_N.ckpt` in the default root directory and runs `scontrol requeue` from rank 0; the next run resumes from
that checkpoint on its own (`ckpt_path=None` on SLURM picks the newest hpc checkpoint). It installs the handler
only where `signal.getsignal(SIGUSR1)` is SIG_DFL or None, which is what slurmgen's `handler: program` must let it
see. Prints the same lines as train_lightning.py (tests/integrations/integration_helpers.py reads them).
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


def digest(module: torch.nn.Module) -> str:
    text = repr([p.detach().double().flatten().tolist() for p in module.parameters()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Tiny(L.LightningModule):
    def __init__(self, step_time: float) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1, bias=False)
        self.step_time = step_time

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.global_step * 1000 + self.global_rank)
        x = torch.randn(16, 8, generator=gen)
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
    args = parser.parse_args()
    torch.manual_seed(0)
    trainer = L.Trainer(
        accelerator="cpu",
        strategy="ddp",
        devices=int(os.environ.get("SLURM_NTASKS_PER_NODE", "1")),
        num_nodes=int(os.environ.get("SLURM_NNODES", "1")),
        max_steps=args.steps,
        plugins=[SLURMEnvironment(auto_requeue=True)],  # Lightning's default on SLURM, spelled out
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    data = DataLoader(TensorDataset(torch.arange(4 * args.steps)))
    trainer.fit(Tiny(args.step_time), data)  # ckpt_path None: Lightning resumes from its hpc checkpoint itself


if __name__ == "__main__":
    main()
