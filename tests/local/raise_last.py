"""A bug on rank 1 whose rank exits last: it raises at step 20, and its atexit hooks first close its process group
(its peers see the connection close and exit with the peer-loss code) and then take 3 s (as a tracker's finish or
a data loader's shutdown do). Every step all-reduces, through Preemption's peer-loss exit.

    raise_last.py STEPS
"""

import atexit
import sys
import time

import torch
import torch.distributed as dist

from slurmgen.runtime import Preemption, init_distributed

steps = int(sys.argv[1])
rank = init_distributed().rank
pre = Preemption()
for step in range(1, steps + 1):
    t = torch.ones(1)
    dist.all_reduce(t)
    time.sleep(0.05)
    if rank == 1 and step == 20:
        atexit.register(time.sleep, 3.0)  # atexit runs last in, first out: the group closes, then the wait
        atexit.register(dist.destroy_process_group)
        print("RAISING", flush=True)
        raise ValueError(f"bad batch at step {step}")
    if pre.should_stop(step=step):
        pre.save_and_exit({"step": step})
print(f"DONE {steps}", flush=True)
