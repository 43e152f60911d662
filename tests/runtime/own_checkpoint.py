"""A training script that knows nothing of slurmgen, in the shape of pytorch/examples' multinode DDP tutorial
(distributed/ddp-tutorial-series/multinode.py): env:// process group, a Trainer that saves its own snapshot every
few steps (here atomically: a temporary file, then a rename) and resumes from it when it exists. DDP and the
optimizer are written out as one all_reduce and an SGD step (sgd_step: they cost 2.9 s of CPU per rank start).

    --handle SIG --handler-at STEP   like a framework: its own handler for SIG, installed late (every rank at the
                                     same step); on SIG all ranks agree at a step boundary, rank 0 saves and
                                     requeues the job itself (scontrol requeue), and everyone exits 0
                                     (preemption.handler: program)

    --die-rank R --die-at STEP --die-once PATH   rank R kills itself with SIGKILL after STEP, once (PATH marks it)
    --hang-rank R --hang-at STEP --hang-once PATH   rank R stops making progress at STEP, once (in
                                                 stuck_in_data_loader, a sleep that never returns)
    --bug-at STEP                                every rank raises ValueError at STEP, every time (a deterministic bug)
    --bug-rank R                                 with --bug-at: only rank R raises (its peers die of it)

Lines for the tests: `SAVED <step> <weights>` (rank 0), `RESUMED <step> <weights>` (every rank),
`HANDLER <sig>` (rank 0, once installed), `STOP <step> <weights>` (rank 0), `DONE <steps> <weights>` (every rank).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist


def weights(model: torch.nn.Module) -> str:
    return f"{sum(float(p.detach().double().sum()) for p in model.parameters()):.10f}"


def sgd_step(model: torch.nn.Module, lr: float) -> None:
    """The gradient summed over the ranks by one all_reduce, then plain SGD (no momentum), written out: DDP's
    constructor and torch.optim's first optimizer each import torch._dynamo (torch/nn/parallel/distributed.py,
    torch/_compile.py), 2.9 s of CPU per rank start that the tests running this program many times do not need."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.sub_(p.grad, alpha=lr / dist.get_world_size())


class Trainer:
    def __init__(self, snapshot: str, save_every: int) -> None:
        self.rank = dist.get_rank()
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1, bias=False)
        self.snapshot, self.save_every, self.step = snapshot, save_every, 0
        self.stop_requested = False
        if os.path.exists(snapshot):
            state = torch.load(snapshot, weights_only=True)
            self.model.load_state_dict(state["model"])
            self.step = int(state["step"])
            print(f"RESUMED {self.step} {weights(self.model)} rank={self.rank} at={time.time():.3f}", flush=True)

    def save(self) -> None:
        if self.rank != 0:
            return
        state = {"model": self.model.state_dict(), "step": self.step}
        tmp = f"{self.snapshot}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, self.snapshot)
        print(f"SAVED {self.step} {weights(self.model)}", flush=True)

    def train_step(self) -> None:
        generator = torch.Generator().manual_seed(self.step * 101 + self.rank)
        x = torch.randn(8, 4, generator=generator)
        loss = (self.model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        self.model.zero_grad()
        loss.backward()
        sgd_step(self.model, 0.05)
        self.step += 1

    def stop_agreed(self) -> bool:
        flag = torch.tensor([1 if self.stop_requested else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


def requeue_job() -> None:
    """What a framework does on its requeue signal: `scontrol requeue` this job (one array task, never its array)."""
    env = os.environ
    key = env["SLURM_JOB_ID"]
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        key = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    done = subprocess.run(["scontrol", "requeue", key], capture_output=True, text=True, check=False)
    print(f"REQUEUE {key} rc={done.returncode} {done.stderr.strip()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-time", type=float, default=0.05)
    parser.add_argument("--save-every", type=int, default=20)
    parser.add_argument("--snapshot", required=True)
    parser.add_argument("--handle", default=None, help="a signal this program handles itself")
    parser.add_argument("--handler-at", type=int, default=0, help="the step at which the handler is installed")
    parser.add_argument("--die-rank", type=int, default=-1)
    parser.add_argument("--die-at", type=int, default=-1)
    parser.add_argument("--die-once", default=None)
    parser.add_argument("--bug-at", type=int, default=-1)
    parser.add_argument("--bug-rank", type=int, default=-1)
    parser.add_argument("--hang-rank", type=int, default=-1)
    parser.add_argument("--hang-at", type=int, default=-1)
    parser.add_argument("--hang-once", default=None)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    trainer = Trainer(args.snapshot, args.save_every)
    handler_due = args.handle is not None
    while trainer.step < args.steps:
        if handler_due and trainer.step >= args.handler_at:
            sig = getattr(signal, f"SIG{args.handle}")
            signal.signal(sig, lambda signum, frame: setattr(trainer, "stop_requested", True))
            handler_due = False
            if trainer.rank == 0:
                print(f"HANDLER {args.handle}", flush=True)
        if trainer.step == args.bug_at and args.bug_rank in (-1, trainer.rank):
            raise ValueError(f"bad batch at step {trainer.step}")
        trainer.train_step()
        time.sleep(args.step_time)
        hangs = trainer.rank == args.hang_rank and trainer.step == args.hang_at
        if hangs and args.hang_once and not os.path.exists(args.hang_once):
            open(args.hang_once, "w").close()
            print(f"HANGING {trainer.step} at={time.time():.3f}", flush=True)
            stuck_in_data_loader()
        dies = trainer.rank == args.die_rank and trainer.step == args.die_at
        if dies and args.die_once and not os.path.exists(args.die_once):
            open(args.die_once, "w").close()
            print(f"DYING {trainer.step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if trainer.step % args.save_every == 0:
            trainer.save()
        if args.handle is not None and trainer.stop_agreed():
            if trainer.rank == 0:
                print(f"STOP {trainer.step} {weights(trainer.model)}", flush=True)
                trainer.save()
                requeue_job()
            dist.barrier()
            end()
    print(f"DONE {trainer.step} {weights(trainer.model)} rank={trainer.rank}", flush=True)
    end()


def stuck_in_data_loader() -> None:
    """A hang that no exception reveals: the watchdog must find this function in the rank's stacks."""
    while True:
        time.sleep(3600)


def end() -> None:
    """Exit 0 without the interpreter's teardown: torch's gloo threads can abort a finished process there
    ("terminate called without an active exception", SIGABRT: seen once in CI, a rank that had printed DONE and
    destroyed its process group). The tests judge slurmgen, not that race."""
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
