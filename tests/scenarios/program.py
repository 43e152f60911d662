"""The scenario engine's program: deterministic, with an accumulator in its state, so that a step skipped or applied
twice after a restore changes its final result (`expected_result` gives the uninterrupted one).

    program.py --shape pg|nopg|own --steps N --step-time S --save-every K --state PATH
               [--fail-rank R --fail-at STEP --linger SECONDS --fail-once PATH]

Shapes: `pg` uses `Preemption` and a process group (`init_distributed`; every step all-reduces the step number);
`nopg` uses `Preemption` alone (every rank steps on its own); `own` knows nothing of slurmgen: an env:// process
group, and a checkpoint file of its own (PATH, JSON, written by rank 0 atomically) that it resumes from.
`--fail-rank R --fail-at STEP` makes rank R raise at STEP (every start, or once with --fail-once); with --linger it
exits SECONDS after its peers saw it go (its atexit hooks: the group closes first, then the wait), as a tracker's
finish does.

Lines: `RESUMED <step> <acc>`, `STEP <n>` (after step n is applied), `SAVED <step>`, `RESULT <acc>` (every rank, at
the end), `FAILING <step>`.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import time
from typing import Any

MODULUS = 2**61 - 1


def advance(acc: int, step: int, world: int) -> int:
    """One step of the accumulator: order-sensitive, so a lost or repeated step shows in the result."""
    return (acc * 1_000_003 + (step + 1) * world) % MODULUS


def expected_result(steps: int, world: int) -> int:
    acc = 1
    for step in range(steps):
        acc = advance(acc, step, world)
    return acc


def load_own(path: str) -> dict[str, Any] | None:
    if not os.path.exists(path):
        return None
    with open(path) as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def save_own(path: str, state: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def options(state: str) -> argparse.ArgumentParser:
    """The options every shape's program takes (this one's and program_lightning.py's); ``state``: --state's default."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--step-time", type=float, default=0.1)
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--state", default=state)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-at", type=int, default=-1)
    parser.add_argument("--fail-once", default="")
    parser.add_argument("--linger", type=float, default=0.0)
    return parser


def fail_here(args: argparse.Namespace, rank: int, step: int, *at_exit: Any) -> None:
    """Raise the scenario's bug where --fail-rank/--fail-at say (once, with --fail-once). With --linger the
    program waits that long at its exit, after ``at_exit`` (atexit: last in, first out), as a tracker's finish does."""
    if rank != args.fail_rank or step != args.fail_at:
        return
    once = args.fail_once
    if once and os.path.exists(once):
        return
    if once:
        open(once, "w").close()
    print(f"FAILING {step}", flush=True)
    if args.linger:
        atexit.register(time.sleep, args.linger)
        for hook in at_exit:
            atexit.register(hook)
    raise ValueError(f"bad batch at step {step}")


def main() -> None:
    parser = options("own-state.json")
    parser.add_argument("--shape", choices=["pg", "nopg", "own"], required=True)
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    env = os.environ
    rank = int(env.get("RANK", env.get("SLURM_PROCID", "0")))
    world = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1")))
    pre: Any = None
    if args.shape == "own":
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        state = load_own(args.state)
        dist.barrier()  # every rank read the file before rank 0 writes a newer one
    else:
        from slurmgen.runtime import Preemption

        if args.shape == "pg":
            from slurmgen.runtime import init_distributed

            got = init_distributed()
            rank, world = got.rank, got.world_size
        pre = Preemption()
        state = pre.load()
    step, acc = 0, 1
    if state is not None:
        step, acc = int(state["step"]), int(state["acc"])
        print(f"RESUMED {step} {acc}", flush=True)
    grouped = args.shape != "nopg"
    while step < args.steps:
        fail_here(args, rank, step, dist.destroy_process_group)  # the group closes, then the wait
        n = world
        if grouped:
            t = torch.ones(1)
            dist.all_reduce(t)
            n = int(t.item())
        acc = advance(acc, step, n)
        step += 1
        time.sleep(args.step_time)
        print(f"STEP {step}", flush=True)
        if args.save_every and step % args.save_every == 0:
            if pre is not None:
                pre.save({"step": step, "acc": acc})
                print(f"SAVED {step}", flush=True)
            elif rank == 0:
                save_own(args.state, {"step": step, "acc": acc})
                print(f"SAVED {step}", flush=True)
        if pre is not None and pre.should_stop(step=step):
            pre.save_and_exit({"step": step, "acc": acc})
    print(f"RESULT {acc}", flush=True)
    if grouped:
        dist.destroy_process_group()
    sys.exit(0)  # a plain end: Preemption's exit hook records that the program finished, and its last step


if __name__ == "__main__":
    main()
