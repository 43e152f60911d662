"""One point of the sweep tests' sweeps (no torch unless it saves): records what it ran with, when, and how.

`sweep_point.py OUT SECONDS X [--steps N]`: writes OUT/run-<index>-<array>_<task>-<restart>.json with its values
(SLURMGEN_SWEEP_PARAMS, _INDEX, _ID, the W&B group, its argv) and its start and end, then exits 3 when X is odd
and OUT/allow-<X> does not exist (a point that fails until the test allows it). With --steps it runs a loop under
slurmgen's Preemption: it resumes from its saved step, prints `STEP n` and stops, saves and requeues on a signal.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    out, seconds, x = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    env = os.environ
    start = time.time()
    restart = int(env.get("SLURM_RESTART_COUNT", "0"))
    key = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    record = {
        "index": int(env["SLURMGEN_SWEEP_INDEX"]),
        "params": json.loads(env["SLURMGEN_SWEEP_PARAMS"]),
        "sweep": env["SLURMGEN_SWEEP_ID"],
        "group": env.get("WANDB_RUN_GROUP"),
        "x": x,
        "key": key,
        "restart": restart,
        "array": {k: env.get(k) for k in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT")},
    }
    if "--steps" in sys.argv:
        from slurmgen.runtime import Preemption

        steps = int(sys.argv[sys.argv.index("--steps") + 1])
        pre = Preemption()
        state = pre.load()
        first = 0 if state is None else int(state["step"])
        if state is not None:
            print(f"RESUMED x={state['x']} at step {first}", flush=True)
            record["resumed"] = [state["x"], first]
        print(f"READY x={x}", flush=True)
        for step in range(first, steps):
            time.sleep(seconds)
            if pre.should_stop():
                print(f"STOP x={x} at step {step + 1}", flush=True)
                pre.save_and_exit({"step": step + 1, "x": x})
        print(f"DONE x={x}", flush=True)
    else:
        time.sleep(seconds)
    record["start"], record["end"] = start, time.time()
    with open(os.path.join(out, f"run-{record['index']}-{key}-{restart}.json"), "w") as f:
        json.dump(record, f)
    return 3 if x % 2 and not os.path.exists(os.path.join(out, f"allow-{x}")) else 0


if __name__ == "__main__":
    sys.exit(main())
