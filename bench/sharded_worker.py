"""One rank of bench/sharded_save.py: an FSDP2 model whose parameters plus AdamW state total --gib GiB over all
ranks, saved sharded (every rank its part) or gathered (today's path: the full state on rank 0, one file).

    --action preempt   train (a stand-in step) until the preemption signal, then save_and_exit; rank 0 prints
                       one JSON line from on_save: the save's record and its peak RSS since the stop
    --action periodic  --saves N saves every --every steps (--async-save: in the background); every rank prints
                       one JSON line: each save's blocked and total seconds, and the step times
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
from torch.distributed.fsdp import fully_shard

from slurmgen.runtime import Preemption, build_mesh, destroy, init_distributed
from slurmgen.runtime.checkpoint.record import SaveRecord

LAYERS = 8


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (proc(5), Linux 4.0+).
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def build(gib: float, world: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """Parameters + exp_avg + exp_avg_sq = 12 bytes per parameter; made on the meta device, so no rank ever holds
    the full model, then each rank fills its own shards."""
    width = int((gib * 2**30 / 12 / LAYERS) ** 0.5)
    with torch.device("meta"):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(LAYERS)])
    mesh = build_mesh(dp_shard=world)
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for param in model.parameters():
            param.normal_()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for param in model.parameters():
        param.grad = torch.randn_like(param)  # a DTensor like its parameter: the step is local to each rank
    opt.step()
    opt.zero_grad()
    return model, opt


def stand_in_step(work: torch.Tensor) -> None:
    """A step as a GPU trainer's CPU sees it: 20 ms of waiting for the device, a little compute, one small
    collective. (A CPU-bound stand-in would only measure how 4 ranks and a writer share this VM's 2 cores.)"""
    time.sleep(0.02)
    for _ in range(4):
        work = torch.tanh(work @ work)
    dist.all_reduce(torch.ones(1))


def state_of(model: torch.nn.Module, opt: torch.optim.Optimizer, mode: str) -> dict[str, Any]:
    full = mode == "gathered"
    options = StateDictOptions(full_state_dict=full, cpu_offload=full)  # gathered: only rank 0 holds it
    model_sd, optim_sd = get_state_dict(model, opt, options=options)
    return {"model": model_sd, "optim": optim_sd}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--mode", choices=("sharded", "gathered"), default="sharded")
    parser.add_argument("--action", choices=("preempt", "periodic"), default="preempt")
    parser.add_argument("--saves", type=int, default=3)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--async-save", action="store_true")
    parser.add_argument("--dry", action="store_true", help="periodic: the same loop without saving")
    args = parser.parse_args()
    info = init_distributed()
    model, opt = build(args.gib, info.world_size)
    work = torch.randn(128, 128) / 12
    report: dict[str, Any] = {"rank": info.rank}
    durations: list[float] = []

    def on_save(record: SaveRecord) -> None:
        durations.append(record.duration_s)
        if info.rank == 0 and args.action == "preempt":
            peak = rss_kib("VmHWM") * 1024 - report["rss_before"]
            out = {"bytes": record.size_bytes, "save_s": record.duration_s, "peak_rss_extra": peak}
            print(json.dumps(out), flush=True)

    pre = Preemption(on_save=on_save)
    print(f"READY rank={info.rank}", flush=True)
    if args.action == "preempt":
        while not pre.should_stop():
            stand_in_step(work)
        report["rss_before"] = rss_kib("VmRSS") * 1024
        reset_peak_rss()
        pre.save_and_exit(state_of(model, opt, args.mode))
    blocked: list[float] = []
    dist.barrier()
    loop_started = time.monotonic()
    for step in range(1, args.saves * args.every + args.every // 2):
        stand_in_step(work)
        if step % args.every == 0 and not args.dry:
            called = time.monotonic()
            pre.save(state_of(model, opt, args.mode), async_=args.async_save)
            blocked.append(time.monotonic() - called)
    pre.wait_for_save()
    dist.barrier()
    loop_s = time.monotonic() - loop_started
    print(json.dumps({**report, "blocked_s": blocked, "save_s": durations, "loop_s": loop_s}), flush=True)
    destroy()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
