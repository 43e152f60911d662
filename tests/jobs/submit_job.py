"""The program the real-cluster submit tests run in every task (through slurmgen's runtime entry point).

submit_job.py ranks              print one line with this task's rank variables
submit_job.py exit N             print the rank line, then rank 0 exits N and the others 0
submit_job.py requeue-me         print the rank line; on the first run sleep until killed (a requeue)
submit_job.py wait-signal SIG    print "ready", then sleep until SIG arrives; print it and exit 0
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time


def rank_line() -> str:
    env = os.environ
    fields = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_RESTART_COUNT")
    values = " ".join(f"{name}={env.get(name, '-')}" for name in fields)
    return f"task {values} host={socket.gethostname()}"


def main(argv: list[str]) -> int:
    mode = argv[0]
    print(rank_line(), flush=True)
    if mode == "exit":
        return int(argv[1]) if os.environ.get("RANK") == "0" else 0
    if mode == "requeue-me":
        if not os.environ.get("SLURM_RESTART_COUNT"):  # unset on the first run (src/common/env.c)
            time.sleep(600)
        return 0
    if mode == "wait-signal":
        got: list[int] = []
        signal.signal(getattr(signal, f"SIG{argv[1]}"), lambda signum, frame: got.append(signum))
        print(f"rank {os.environ.get('RANK')} ready", flush=True)
        deadline = time.monotonic() + 600
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        print(f"rank {os.environ.get('RANK')} got SIG{argv[1]}" if got else "no signal", flush=True)
        return 0 if got else 1
    if mode == "slow":
        for i in range(int(argv[1])):
            print(f"rank {os.environ.get('RANK')} line {i}", flush=True)
            time.sleep(0.3)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
