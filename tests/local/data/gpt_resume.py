"""A training program in nanoGPT's manner, which saves and resumes by itself and knows nothing of slurmgen's
preemption handling: torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and a gloo process group,
`iter N: loss X, time Tms` lines on stdout, an evaluation every --eval-interval iterations whose improvement alone
writes `ckpt.pt` in --out-dir (torch.save, in place, as nanoGPT does), and `--init_from=resume`, which fails without a
checkpoint. `--die-at N --die-rank R --die-once FILE`: rank R's program dies of SIGKILL at iteration N, once.

Nothing in it knows slurmgen: its progress reaches slurmgen only through its `iter N:` lines, read by the spec's
`progress.pattern`, and its saves only through the spec's `checkpoint.path`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--init_from", default="scratch", choices=("scratch", "resume"))
    parser.add_argument("--out-dir", default="out")
    parser.add_argument("--max-iters", type=int, default=200)
    parser.add_argument("--eval-interval", type=int, default=10)
    parser.add_argument("--step-time", type=float, default=0.05)
    parser.add_argument("--die-at", type=int, default=-1, help="this rank's program kills itself (SIGKILL) here")
    parser.add_argument("--die-rank", type=int, default=1)
    parser.add_argument("--die-once", default="", help="a file: the death happens once, in the start that makes it")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    path = os.path.join(args.out_dir, "ckpt.pt")
    it, best = 0, float("inf")
    if args.init_from == "resume":
        if not os.path.exists(path):
            print(f"no checkpoint at {path} to resume from", file=sys.stderr, flush=True)
            return 1
        saved = torch.load(path)
        # As nanoGPT: the saved iteration is done again (the save was made before its step), and its evaluation
        # is no improvement on the best loss it saved.
        it, best = int(saved["iter_num"]), float(saved["best_val_loss"])
        print(f"resumed from iter {saved['iter_num']}", flush=True)
    weight = torch.zeros(4)
    last = time.time()
    while it <= args.max_iters:
        if it % args.eval_interval == 0 and it > 0:
            # Every third evaluation is worse than the best so far: only improvements are saved.
            loss = 100.0 / (it + 1) + (5.0 if (it // args.eval_interval) % 3 == 2 else 0.0)
            if loss < best and rank == 0:
                best = loss
                os.makedirs(args.out_dir, exist_ok=True)
                torch.save({"iter_num": it, "best_val_loss": best, "weight": weight}, path)
                print(f"saving checkpoint to {path} at iter {it}", flush=True)
            best = min(best, loss)
        if it == args.die_at and rank == args.die_rank and not os.path.exists(args.die_once):
            open(args.die_once, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)  # a crash: no handler, no exit code of its own
        grad = torch.ones(4)
        dist.all_reduce(grad)
        weight -= 0.01 * grad
        time.sleep(args.step_time)
        if rank == 0:
            now = time.time()  # as nanoGPT: each iteration's own time, from the last one's end to this one's
            print(f"iter {it}: loss {1.0 / (it + 1):.4f}, time {(now - last) * 1000:.2f}ms", flush=True)
            last = now
        it += 1
    if rank == 0:
        print(f"DONE {args.max_iters}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
