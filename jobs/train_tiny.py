"""A tiny data-parallel training job for jobs/cpu-debug.yaml: runs anywhere torch runs (CPU, gloo).

Every rank prints one line per milestone, prefixed with its rank, so logs show who did what.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    dist.init_process_group(backend=os.environ.get("SLURMGEN_BACKEND", "gloo"))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank}/{world}: started on {os.uname().nodename}", flush=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step in range(args.steps):
        x = torch.randn(16, 8)
        loss = ddp(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    print(f"rank {rank}/{world}: done after {args.steps} steps, all_reduce={total.item():g}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
