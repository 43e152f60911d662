"""A training loop whose ranks all-reduce at every step, for `slurmgen run --hang-rank`: 0.05 s steps, the step and
its total given to Preemption (status shows a rate and an ETA), a save every 40 steps, resumed from its state. A
stopped rank leaves the others waiting in their next all_reduce.

    hang_steps.py TOTAL
"""

import sys
import time

import torch
import torch.distributed as dist

from slurmgen.runtime import Preemption, init_distributed

total = int(sys.argv[1])
init_distributed()
pre = Preemption(total_steps=total)
state = pre.load() or {"step": 0}
step = int(state["step"])
print(f"RESUMED {step}", flush=True)
while step < total:
    dist.all_reduce(torch.ones(1))
    time.sleep(0.05)
    step += 1
    if step % 40 == 0:
        pre.save({"step": step})
    if pre.should_stop(step=step):
        pre.save_and_exit({"step": step})
print(f"DONE {step}", flush=True)
