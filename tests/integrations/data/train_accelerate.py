"""A tiny accelerate program (CPU, gloo, DDP over every task of the job) that survives preemption.

The slurmgen parts are the marked lines: `load_state()` restores what the previous run saved with accelerate's
own `save_state`, and `save_state_and_exit` saves, requeues and exits once every rank agreed to stop. The loader
is accelerate's (sharded over the ranks, not shuffled) and `skip_first_batches` resumes it where it stopped, so
the resumed run ends where an uninterrupted one does.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from slurmgen.integrations.accelerate import SlurmgenPreemption


def digest(module: torch.nn.Module) -> str:
    """The parameters' exact values (float32 widened to float64 exactly, printed round-trip), hashed."""
    text = repr([p.detach().double().flatten().tolist() for p in module.parameters()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-time", type=float, default=0.0, help="seconds to sleep per step")
    args = parser.parse_args()

    accelerator = Accelerator()  # on CPU it joins the job's process group through ACCELERATE_USE_CPU (slurmgen)
    preemption = SlurmgenPreemption(accelerator)  # slurmgen
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    samples = torch.randn(4 * accelerator.num_processes * args.steps, 8, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(samples), batch_size=4)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)

    state = preemption.load_state()  # slurmgen: None on the first run
    start = state["step"] if state else 0
    rank, world = accelerator.process_index, accelerator.num_processes
    print(f"rank {rank}/{world}: start at step {start}, weights {digest(model)}", flush=True)
    batches = accelerator.skip_first_batches(data, start) if start else data
    for step, (x,) in enumerate(batches, start):
        if step == args.steps:
            break
        loss = model(x).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        time.sleep(args.step_time)
        if preemption.should_stop():  # slurmgen: every rank, every step
            if rank == 0:
                print(f"rank 0: checkpoint at step {step + 1}, weights {digest(model)}", flush=True)
            preemption.save_state_and_exit(step=step + 1)  # slurmgen
    print(f"rank {rank}: final weights {digest(model)} at step {args.steps}", flush=True)


if __name__ == "__main__":
    main()
