"""A tiny data-parallel training job (CPU, gloo) that survives preemption, for jobs/cpu-debug.yaml.

It uses slurmgen's runtime the way a real training script would: init_distributed, then Preemption to load the
previous run's state, save periodically, and stop at a step boundary when Slurm signals. The data of each step
is derived from the step number, so a run that was preempted and resumed ends with the same weights as one that
never stopped. Every rank prints one line per milestone; rank 0 prints the weights' checksum when it saves,
resumes and finishes, so logs show that a resume picked up exactly what was saved.
"""

from __future__ import annotations

import argparse
import time

import torch

from slurmgen.runtime import Preemption, destroy, init_distributed, wrap_ddp


class SlowToSave:
    """Pickling it takes ``seconds``: rehearses a stop save that does not fit its window (--stop-save-seconds)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self) -> tuple[type, tuple[float]]:
        time.sleep(self.seconds)
        return (SlowToSave, (self.seconds,))


def checksum(model: torch.nn.Module) -> str:
    total = sum(float(p.detach().double().sum()) for p in model.parameters())
    return f"{total:.10f}"


def light_step(model: torch.nn.Module, lr: float, world_size: int) -> None:
    """--light's update: the gradient summed over the ranks by one all_reduce, then plain SGD (no momentum). DDP's
    constructor and torch.optim's first optimizer each import torch._dynamo (torch/nn/parallel/distributed.py,
    torch/_compile.py), about 2.9 s of CPU at every rank's start on top of `import torch`'s 2.5 s; the tests that
    start this job hundreds of times on a small CI machine skip it. A real training script uses DDP and torch.optim
    (this job's default)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                torch.distributed.all_reduce(p.grad)
                p.sub_(p.grad, alpha=lr / world_size)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--step-time", type=float, default=0.0, help="seconds to sleep per step")
    parser.add_argument("--save-every", type=int, default=100)
    parser.add_argument("--stop-save-seconds", type=float, default=0.0, help="make the stop's save this slow")
    parser.add_argument("--stop-delay", type=float, default=0.0, help="seconds from seeing the stop to its save")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate (jobs/sweep-lr.yaml sweeps it)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    parser.add_argument(
        "--light", action="store_true", help="one all_reduce and plain SGD instead of DDP and torch.optim"
    )
    args = parser.parse_args()

    info = init_distributed()
    pre = Preemption()
    torch.manual_seed(args.seed)
    # One parameter tensor: DDP's gradient bucket then holds the same layout before and after its first-step
    # rebuild, so a resumed run sums gradients in exactly the order an uninterrupted one does (bit-identical
    # weights). With several tensors the first step after a resume may round differently in the last bits; see
    # "Bit-identical resumes with DDP" in docs/runtime-internals.md.
    model = torch.nn.Linear(8, 1, bias=False)
    opt = None if args.light else torch.optim.SGD(model.parameters(), lr=args.lr)
    state = pre.load()
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        if opt is not None:
            opt.load_state_dict(state["opt"])
        start = state["step"]
    ddp = model if args.light else wrap_ddp(model)
    tag = f"rank {info.rank}/{info.world_size}"
    print(
        f"{tag}: start at step {start} on {info.hostname}, run {pre.restart_count + 1}, "
        f"last stop: {pre.last_cause}, master {info.master_addr}:{info.master_port}, local rank {info.local_rank}",
        flush=True,
    )
    if info.rank == 0 and state is not None:
        print(f"{tag}: resumed weights {checksum(model)} at step {start}", flush=True)

    def snapshot(step: int) -> dict[str, object]:
        saved: dict[str, object] = {"step": step, "model": model.state_dict()}
        if opt is not None:
            saved["opt"] = opt.state_dict()
        return saved

    for step in range(start, args.steps):
        gen = torch.Generator().manual_seed(step * 1000 + info.rank)
        x = torch.randn(16, 8, generator=gen)
        loss = ddp(x).pow(2).mean()
        if opt is None:
            model.zero_grad()
            loss.backward()
            light_step(model, args.lr, info.world_size)
        else:
            opt.zero_grad()
            loss.backward()
            opt.step()
        if args.save_every and (step + 1) % args.save_every == 0:
            pre.save(snapshot(step + 1))
        if args.step_time:
            time.sleep(args.step_time)
        if pre.should_stop():
            if info.rank == 0:
                print(f"{tag}: stopping after step {step + 1}, weights {checksum(model)}", flush=True)
            time.sleep(args.stop_delay)  # a last step that takes a while to end (0: none)
            final = snapshot(step + 1)
            if args.stop_save_seconds:
                final["slow"] = SlowToSave(args.stop_save_seconds)
            pre.save_and_exit(final)
    total = torch.tensor([float(info.rank + 1)])
    torch.distributed.all_reduce(total)
    print(f"{tag}: done after {args.steps} steps, all_reduce={total.item():g}, weights {checksum(model)}", flush=True)
    if info.rank == 0:
        print(f"{tag}: final weights {checksum(model)}", flush=True)
    destroy()


if __name__ == "__main__":
    main()
