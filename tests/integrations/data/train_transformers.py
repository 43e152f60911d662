"""A tiny transformers.Trainer program (CPU, gloo, DDP over every task of the job) that survives preemption.

The slurmgen parts are the two marked lines: the callback makes slurmgen's stop a Trainer checkpoint
(`output_dir/checkpoint-<step>`) and a requeue, and `resume_from_checkpoint()` gives the next run that checkpoint.
`Report` only prints what the tests compare. The Trainer resumes the data where it stopped (it skips the batches
already seen and restores every rank's RNG state), so the resumed run ends where an uninterrupted one does.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from slurmgen.integrations.transformers import SlurmgenPreemption


def digest(module: torch.nn.Module) -> str:
    """The parameters' exact values (float32 widened to float64 exactly, printed round-trip), hashed."""
    text = repr([p.detach().double().flatten().tolist() for p in module.parameters()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Tiny(torch.nn.Module):
    def __init__(self, step_time: float) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1, bias=False)
        self.step_time = step_time

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        time.sleep(self.step_time)
        return {"loss": self.layer(x).pow(2).mean()}


class Samples(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": torch.randn(8, generator=torch.Generator().manual_seed(index))}


class Report(TrainerCallback):
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, _: TrainerControl, **kw: object) -> None:
        tag = f"rank {args.process_index}/{args.world_size}"
        print(f"{tag}: start at step {state.global_step}, weights {digest(self.model)}", flush=True)

    def on_save(self, args: TrainingArguments, state: TrainerState, _: TrainerControl, **kw: object) -> None:
        if args.process_index == 0:
            print(f"rank 0: checkpoint at step {state.global_step}, weights {digest(self.model)}", flush=True)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, _: TrainerControl, **kw: object) -> None:
        print(f"rank {args.process_index}: final weights {digest(self.model)} at step {state.global_step}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-time", type=float, default=0.0, help="seconds to sleep per step")
    parser.add_argument("--output-dir", default="hf-output")
    args = parser.parse_args()

    preemption = SlurmgenPreemption()  # slurmgen: first, so it holds the signals before anything slow
    torch.manual_seed(0)
    model = Tiny(args.step_time)
    training = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=4,
        learning_rate=0.01,
        optim="sgd",
        dataloader_pin_memory=False,  # no GPU to pin for
        lr_scheduler_type="constant",
        save_strategy="no",  # the preemption's save is the only one here
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    data = Samples(4 * training.world_size * args.steps)
    trainer = Trainer(model=model, args=training, train_dataset=data, callbacks=[Report(model), preemption])
    trainer.train(resume_from_checkpoint=preemption.resume_from_checkpoint())  # slurmgen: None on the first run


if __name__ == "__main__":
    main()
