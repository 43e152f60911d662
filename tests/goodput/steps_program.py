"""A training loop for the goodput tests: 0.05 s steps, a periodic save every 40 steps, the program's step and its
total given to Preemption (so status shows them and an ETA), resumed from its state.

    steps_program.py TOTAL [--die-at STEP] [--hang-at STEP] [--once DIR]

--die-at: SIGKILL itself after STEP, once (DIR/died marks it); --hang-at: stop making progress at STEP, once
(DIR/hung), a sleep that never returns, as a deadlock would.
"""

import argparse
import os
import signal
import time

from slurmgen.runtime import Preemption

parser = argparse.ArgumentParser()
parser.add_argument("total", type=int)
parser.add_argument("--die-at", type=int)
parser.add_argument("--hang-at", type=int)
parser.add_argument("--once", default=".")
args = parser.parse_args()


def first_time(name: str) -> bool:
    try:
        os.close(os.open(os.path.join(args.once, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


pre = Preemption(total_steps=args.total)
state = pre.load() or {"step": 0}
step = int(state["step"])
print(f"RESUMED {step}", flush=True)
while step < args.total:
    time.sleep(0.05)
    step += 1
    if step % 40 == 0:
        pre.save({"step": step})
    if step == args.die_at and first_time("died"):
        os.kill(os.getpid(), signal.SIGKILL)
    if step == args.hang_at and first_time("hung"):
        print(f"HANGING {step}", flush=True)
        time.sleep(3600)
    if pre.should_stop(step=step):
        pre.save_and_exit({"step": step})
print(f"DONE {step}", flush=True)
