"""A training loop for the goodput tests: 0.05 s steps, a periodic save every 40 steps, the program's step and its
total given to Preemption (so status shows them and an ETA), resumed from its state."""

import sys
import time

from slurmgen.runtime import Preemption

total = int(sys.argv[1])
pre = Preemption(total_steps=total)
state = pre.load() or {"step": 0}
step = int(state["step"])
print(f"RESUMED {step}", flush=True)
while step < total:
    time.sleep(0.05)
    step += 1
    if step % 40 == 0:
        pre.save({"step": step})
    if pre.should_stop(step=step):
        pre.save_and_exit({"step": step})
print(f"DONE {step}", flush=True)
