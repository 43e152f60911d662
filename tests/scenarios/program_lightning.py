"""The scenario engine's program in a framework's shape: PyTorch Lightning (DDP over gloo on CPU), written as a user
of slurmgen's Lightning integration writes it, with the same accumulator and lines as program.py so the same
invariants judge it.

    program_lightning.py --steps N --step-time S --save-every K --state DIR
                         [--fail-rank R --fail-at STEP --linger SECONDS --fail-once PATH]

- `SlurmgenPreemption` stops, checkpoints with Lightning and requeues at a preemption; `fit` resumes from the
  checkpoint it gives.
- `ModelCheckpoint(every_n_train_steps=K, save_last=True)` in DIR is the program's own periodic save, which a
  restart after a crash resumes from (`ckpt_path=DIR/last.ckpt`), as Lightning users do.
- The accumulator (program.advance) is kept in the checkpoint by on_save_checkpoint / on_load_checkpoint; a step
  skipped or done twice after a restore changes the final RESULT.

Lines as program.py's: `RESUMED <step> <acc>`, `STEP <n>`, `SAVED <step>`, `RESULT <acc>` (every rank),
`FAILING <step>`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: the engine's package

from scenarios.program import advance, fail_here, options  # the same accumulator and options as the other shapes


def main() -> None:
    args = options("lightning-state").parse_args()

    from slurmgen.integrations.lightning import SlurmgenPreemption

    preemption = SlurmgenPreemption()  # first: it holds the signals before anything slow

    import lightning.pytorch as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint
    from torch.utils.data import DataLoader, TensorDataset

    class Accumulating(L.LightningModule):  # type: ignore[misc]  # mypy sees Lightning as Any (pyproject.toml)
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1, bias=False)
            self.acc = 1

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            step = self.global_step
            fail_here(args, self.global_rank, step)
            self.acc = advance(self.acc, step, self.trainer.world_size)
            time.sleep(args.step_time)
            loss: torch.Tensor = self.layer(torch.ones(1, 1)).sum() * 0.0  # DDP's all-reduce still joins every rank
            return loss

        def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
            print(f"STEP {self.global_step}", flush=True)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
            checkpoint["acc"] = self.acc
            print(f"SAVED {self.global_step}", flush=True)

        def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
            self.acc = int(checkpoint["acc"])
            print(f"RESUMED {checkpoint['global_step']} {self.acc}", flush=True)

        def on_train_end(self) -> None:
            print(f"RESULT {self.acc}", flush=True)

    own = ModelCheckpoint(dirpath=args.state, every_n_train_steps=args.save_every, save_last=True, save_top_k=-1)
    trainer = L.Trainer(
        accelerator="cpu",
        strategy="ddp",
        devices=int(os.environ.get("SLURM_NTASKS_PER_NODE", "1")),
        num_nodes=int(os.environ.get("SLURM_NNODES", "1")),
        max_steps=args.steps,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[preemption, own],
    )
    # the newer of slurmgen's stop checkpoint (a preemption) and the program's own last periodic save (a crash)
    found = [p for p in (preemption.ckpt_path(), os.path.join(args.state, "last.ckpt")) if p and os.path.exists(p)]
    resume = max(found, key=os.path.getmtime) if found else None
    data = DataLoader(TensorDataset(torch.arange(4 * args.steps)))  # a placeholder: the step is the data
    trainer.fit(Accumulating(), data, ckpt_path=resume)


if __name__ == "__main__":
    main()
