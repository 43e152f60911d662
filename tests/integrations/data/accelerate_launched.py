"""A plain accelerate program for `launcher: accelerate`: `Accelerator()`, an all-reduce, a few training steps on
every process, and one line per process saying what it saw.

    rank R/W local L node N role O: sum S, launched by accelerate: yes|no, final weights D

S is the all-reduced sum of rank + 1 over every process (W (W + 1) / 2 when all joined one group); N is torchrun's
GROUP_RANK, the node rank accelerate launch gave its torchrun (--machine_rank); D is a hash of the weights after the
steps, which DDP keeps the same on every process; O is torchrun's ROLE_NAME (its --role). `--sleep S` sleeps after
the first step (for a signal to land), and `--save-on-signal PATH` writes PATH from rank 0 when the preemption
signal (USR1) reaches it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys
import time

import torch
from accelerate import Accelerator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--save-on-signal", default="")
    args = parser.parse_args()
    got: list[int] = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))

    accelerator = Accelerator()
    rank, world = accelerator.process_index, accelerator.num_processes
    total = accelerator.reduce(torch.tensor([float(rank + 1)]), reduction="sum")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    for step in range(args.steps):
        x = torch.full((2, 4), float(rank + step))
        loss = model(x).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        if step == 0 and args.sleep:
            print(f"rank {rank}: sleeping at step {step}", flush=True)
            deadline = time.monotonic() + args.sleep
            while not got and time.monotonic() < deadline:
                time.sleep(0.05)
            if got:
                print(f"rank {rank}: got SIGUSR1 at step {step}", flush=True)
                if rank == 0 and args.save_on_signal:
                    with open(args.save_on_signal, "w") as out:
                        out.write("saved\n")
                accelerator.wait_for_everyone()
                sys.exit(0)
    weights = accelerator.unwrap_model(model).weight.detach().double().flatten().tolist()
    digest = hashlib.sha256(repr(weights).encode()).hexdigest()[:16]
    launched = "yes" if os.environ.get("ACCELERATE_MIXED_PRECISION") else "no"  # set by accelerate launch only
    print(
        f"rank {rank}/{world} local {accelerator.local_process_index} node {os.environ.get('GROUP_RANK', '?')} "
        f"role {os.environ.get('ROLE_NAME', '?')}: "
        f"sum {int(total.item())}, launched by accelerate: {launched}, final weights {digest}",
        flush=True,
    )
    accelerator.end_training()


if __name__ == "__main__":
    main()
