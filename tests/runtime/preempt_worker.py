"""A training-loop stand-in for the preemption tests: real process, real signals, real torch (gloo).

Prints `READY` once Preemption is installed and the loop runs, `STEP n` every step, `STOP n` when it stops,
`EXIT rank=r code=c cause=why` as it exits after a stop, `RESUMED n` when it resumed from a state, and `DONE n` at
the end. The state holds a tensor of --state-mb MiB.
With --hold-file, every step waits while that file exists, printing `HELD` once and `GOT <signals>` whenever the
signals this rank received change: a test can deliver several signals and see them arrive before the loop acts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from slurmgen.runtime import Preemption


def hold(path: str, rank: int, pre: Preemption) -> None:
    held = False
    seen: list[str] = []
    while os.path.exists(path):
        if not held:
            print(f"HELD rank={rank}", flush=True)
            held = True
        got = list(dict.fromkeys(pre._received))
        if got != seen:
            print(f"GOT rank={rank} {' '.join(got)}", flush=True)
            seen = got
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--step-time", type=float, default=0.01)
    parser.add_argument("--save-every", type=int, default=0)
    parser.add_argument("--state-mb", type=float, default=0.01)
    parser.add_argument("--dist", action="store_true", help="init_distributed and all_reduce every step")
    parser.add_argument("--static-state", action="store_true", help="do not touch the state every step")
    parser.add_argument("--stall", default="", help="RANK:STEP:SECONDS: that rank pauses after that step (a long save)")
    parser.add_argument("--hold-file", default="", help="wait before each stop check while this file exists")
    parser.add_argument(
        "--die-at",
        default="",
        help="RANK:STEP:PATH: that rank (its SLURM_PROCID without --dist) SIGKILLs itself after that step, once, and "
        "not before every task has printed READY (each leaves PATH.ready-<rank>): its peers are in their loops then",
    )
    args = parser.parse_args()
    rank = 0
    if args.dist:
        from slurmgen.runtime import init_distributed

        rank = init_distributed().rank

    def exit_saying_why(code: int) -> None:  # the cause is settled inside save_and_exit, just before its exit
        print(f"EXIT rank={rank} code={code} cause={pre.cause}", flush=True)
        os._exit(code)

    pre = Preemption(exit=exit_saying_why)
    state = pre.load()
    start = 0
    if state is not None:
        start = int(state["step"])
        print(f"RESUMED {start} {float(state['weights'].sum()):.6f}", flush=True)
    weights = torch.arange(int(args.state_mb * 2**20 / 4), dtype=torch.float32)
    print(f"READY rank={rank} restart={pre.restart_count}", flush=True)
    me = rank if args.dist else int(os.environ.get("SLURM_PROCID", "0"))
    if args.die_at:
        open(f"{args.die_at.split(':', 2)[2]}.ready-{me}", "w").close()
    for step in range(start, args.steps):
        if not args.static_state:
            weights += 1
        if args.dist:
            t = torch.ones(1)
            torch.distributed.all_reduce(t)
        if args.save_every and step % args.save_every == 0:
            pre.save({"step": step, "weights": weights})
            print(f"SAVED {step}", flush=True)
        time.sleep(args.step_time)
        if args.stall and args.stall.split(":")[:2] == [str(rank), str(step)]:
            print(f"STALL {step}", flush=True)
            time.sleep(float(args.stall.split(":")[2]))
        if args.hold_file:
            hold(args.hold_file, rank, pre)
        if args.die_at and args.die_at.split(":")[:2] == [str(me), str(step)]:
            once = args.die_at.split(":", 2)[2]
            if not os.path.exists(once):
                tasks = int(os.environ.get("SLURM_NTASKS", "1"))
                while not all(os.path.exists(f"{once}.ready-{r}") for r in range(tasks)):
                    time.sleep(0.05)
                open(once, "w").close()
                print(f"DYING {step}", flush=True)
                os.kill(os.getpid(), 9)
        if pre.should_stop():
            print(f"STOP {step + 1} {float(weights.sum()):.6f}", flush=True)
            pre.save_and_exit({"step": step + 1, "weights": weights})
        print(f"STEP {step}", flush=True)
    print(f"DONE {args.steps}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
