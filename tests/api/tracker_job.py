"""The program of the tracker tests: real wandb (offline) and real mlflow (a local file store) at once, one
metric per step, its own step checkpoint in ./step. Run by slurmgen with preemption.handler: requeue, so a
preemption stops it with SIGTERM and the job is requeued; the next run continues from ./step and must continue
the same tracker runs. It prints `wandb run <id>` and `mlflow run <id>` at the start of every run.

tracker_job.py STEPS STEP_TIME
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType


def stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(steps: int, step_time: float) -> int:
    signal.signal(signal.SIGTERM, stop)
    marker = Path("step")
    start = int(marker.read_text()) if marker.exists() else 0
    print(f"run {os.environ.get('SLURM_RESTART_COUNT', '0')} starts at step {start}", flush=True)
    import mlflow
    import wandb

    from slurmgen.integrations.mlflow import start_run

    run = wandb.init(project="slurmgen-test", dir=os.getcwd())
    print(f"wandb run {run.id}", flush=True)
    active = start_run()
    assert active is not None
    print(f"mlflow run {active.info.run_id}", flush=True)
    try:
        for step in range(start, steps):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
            Path("step.tmp").write_text(str(step + 1))
            os.replace("step.tmp", marker)  # a stop in the middle of the write leaves the previous step
            time.sleep(step_time)
    finally:
        mlflow.end_run()
        run.finish()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), float(sys.argv[2])))
