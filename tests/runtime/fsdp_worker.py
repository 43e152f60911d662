"""An FSDP2 training job over build_mesh that saves sharded checkpoints and survives preemption.

For tests/runtime/checkpoint/test_sharded_checkpoint.py (local rank processes) and for the cluster tests (srun
or torchrun through the rendered script). Each rank prints milestones on stdout: `READY`, `RESUMED <step> <hash>`,
`SAVED <step>` (with --report-saves, `SAVED <step> <hash>` on rank 0), `STOP <step> <hash>`,
`DONE <step> <hash>`, where <hash> is a SHA-256 over the full (gathered) model weights and optimizer state, printed
by rank 0 (`-` elsewhere), followed by one JSON line at the end. The data of each step is derived from (step,
rank): a run that is preempted and resumed on the same world sees the same batches as one that never stopped.

    python tests/runtime/fsdp_worker.py [--steps N] [--save-every K] [--async-save] [--replicate R]
        [--width W] [--layers L] [--step-time S] [--path P] [--dump FILE] [--report-saves]
        [--kill-at PHASE[@RANK][#N]]

--replicate R builds an HSDP mesh (dp_replicate=R x dp_shard=world/R); otherwise dp_shard=world.
--steps 0 only loads (and dumps, with --dump): the resharding tests load on another world size that way.
--kill-at makes that rank (default: any) SIGKILL itself the N-th time (default: the first) it reaches that phase
of a sharded save (slurmgen.runtime.checkpoint.dcp_io.PHASES): a real kill, with no handler and no cleanup, on
whichever thread the save runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
from torch.distributed.fsdp import fully_shard

from slurmgen.runtime import ModelOptimizerState, Preemption, build_mesh, destroy, init_distributed


def kill_at(wanted: str, rank: int) -> Callable[[str], None] | None:
    """The save phase hook for --kill-at (Preemption's save_phase), or None without one."""
    if not wanted:
        return None
    where_who, _, nth = wanted.partition("#")
    where, _, who = where_who.partition("@")
    seen = 0

    def phase(name: str) -> None:
        nonlocal seen
        if name != where or (who and int(who) != rank):
            return
        seen += 1
        if seen == int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)

    return phase


def make_model(width: int, layers: int, device: str) -> torch.nn.Sequential:
    torch.manual_seed(0)
    blocks: list[torch.nn.Module] = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    blocks.append(torch.nn.Linear(width, 8))  # 8 rows: uneven (or empty) shards on 3 or more ranks
    return torch.nn.Sequential(*blocks).to(device)


def full_state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The whole model and optimizer state on rank 0 (empty elsewhere): every rank must call it."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_state_dict(model, opt, options=options)


def digest(model_sd: dict[str, Any], optim_sd: dict[str, Any]) -> str:
    sha = hashlib.sha256()

    def feed(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                feed(f"{prefix}/{key}", value[key])
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                feed(f"{prefix}/{index}", item)
        elif isinstance(value, torch.Tensor):
            sha.update(prefix.encode())
            sha.update(value.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        else:
            sha.update(f"{prefix}={value!r}".encode())

    feed("model", model_sd)
    feed("optim", optim_sd.get("state", {}))
    return sha.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--save-every", type=int, default=0)
    parser.add_argument("--async-save", action="store_true")
    parser.add_argument("--replicate", type=int, default=1)
    parser.add_argument("--width", type=int, default=48)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--step-time", type=float, default=0.0)
    parser.add_argument("--path", default="")
    parser.add_argument("--dump", default="")
    parser.add_argument("--report-saves", action="store_true")
    parser.add_argument("--kill-at", default="")
    args = parser.parse_args()

    info = init_distributed()
    rank, world = info.rank, info.world_size
    if args.replicate > 1:
        mesh = build_mesh(dp_replicate=args.replicate, dp_shard=world // args.replicate)
    else:
        mesh = build_mesh(dp_shard=world)
    model = make_model(args.width, args.layers, info.device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def report() -> str:
        model_sd, optim_sd = full_state(model, opt)
        return digest(model_sd, optim_sd) if rank == 0 else "-"

    pre = Preemption(path=args.path or None, save_phase=kill_at(args.kill_at, rank))
    state: dict[str, Any] = {"train": ModelOptimizerState(model, opt), "step": 0}
    if pre.load(into=state):
        print(f"RESUMED {state['step']} {report()}", flush=True)
    print(f"READY rank={rank} world={world} restart={pre.restart_count}", flush=True)
    saves: list[dict[str, float]] = []
    for step in range(int(state["step"]), args.steps):
        gen = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(4, args.width, generator=gen).to(info.device)
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        state["step"] = step + 1
        if args.save_every and (step + 1) % args.save_every == 0:
            result = pre.save(state, async_=args.async_save)
            blocked = getattr(result, "blocked_s", None)
            saves.append({"step": step + 1, "blocked_s": blocked if blocked is not None else -1.0})
            print(f"SAVED {step + 1}{' ' + report() if args.report_saves else ''}", flush=True)
        if args.step_time:
            time.sleep(args.step_time)
        if pre.should_stop():
            print(f"STOP {step + 1} {report()}", flush=True)
            pre.save_and_exit(state)
        print(f"STEP {step + 1}", flush=True)
    last = pre.wait_for_save()
    final = report()
    if args.dump:
        model_sd, optim_sd = full_state(model, opt)
        if rank == 0:
            torch.save({"model": model_sd, "optim": optim_sd, "step": state["step"]}, args.dump)
    print(f"DONE {state['step']} {final}", flush=True)
    out = {"rank": rank, "world": world, "step": state["step"], "hash": final, "saves": saves}
    if last is not None:
        out["last_save"] = {"path": last.path, "bytes": last.size_bytes, "duration_s": last.duration_s}
    print(json.dumps(out), flush=True)
    destroy()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
