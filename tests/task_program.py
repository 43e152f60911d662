"""The small task program of the submit, log and exit-code tests (every task runs it, through slurmgen's runtime
entry point); no torch, no slurmgen. The first argument is the mode:

ranks              print one line with this task's rank variables
exit N             print the rank line, then rank 0 exits N and the others 0
requeue-me         print the rank line; on the first run sleep until killed (a requeue)
wait-signal SIG    print the rank line and "ready", then sleep until SIG arrives; print it and exit 0
slow N             print the rank line, then N lines 0.3 s apart
lines N WIDTH GO   every rank prints `READY rank=R`, waits for the file GO, then prints N lines
                   `rank=R line=I xxx...` (WIDTH x's) as fast as it can, with print() and PYTHONUNBUFFERED as the
                   job sets it (two writes per line), then `LINES DONE rank=R`
fail RANK CODE     rank RANK prints a traceback-like line to stderr and exits CODE; every other rank waits
steps FILE [wait]  spec field steps: rank 0 appends `INDEX RESTARTS` (SLURMGEN_STEP_INDEX, SLURM_RESTART_COUNT or
                   0) to FILE and every rank exits 0; with `wait`, in step 1 of the first run every rank prints
                   `waiting` and sleeps until the batch shell stops it (a preemption)
fail-alone RANK CODE FLAG   rank RANK prints a traceback-like line and exits CODE at once; every other rank waits
                   until that rank's FLAG-RANK file exists (it writes it before exiting) and 2 s more, then prints
                   `FINISHED rank=R` and exits 0: a failure the others outlive when srun lets them run on
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


def lines(count: int, width: int, go: str) -> None:
    rank = int(os.environ.get("RANK", "-1"))
    print(f"READY rank={rank}")
    while not os.path.exists(go):
        time.sleep(0.05)
    tail = "x" * width
    for i in range(count):
        print(f"rank={rank} line={i} {tail}")
    print(f"LINES DONE rank={rank}")


def fail(rank: int, code: int) -> int:
    me = int(os.environ.get("RANK", "-1"))
    print(f"STARTED rank={me}", flush=True)
    if me != rank:
        time.sleep(120)
        return 0
    time.sleep(2)
    print(f"ValueError: boom at rank {me}", file=sys.stderr, flush=True)
    return code


def fail_alone(rank: int, code: int, flag: str) -> int:
    me = int(os.environ.get("RANK", "-1"))
    print(f"STARTED rank={me}", flush=True)
    if me == rank:
        print(f"ValueError: boom at rank {me}", file=sys.stderr, flush=True)
        with open(f"{flag}-{me}", "w"):
            pass
        return code
    deadline = time.monotonic() + 120
    while not os.path.exists(f"{flag}-{rank}") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2)  # the failed rank's exit is well behind us: srun, had it ended the step, would have by now
    print(f"FINISHED rank={me}", flush=True)
    return 0


def steps(path: str, wait: bool) -> int:
    index, restarts = os.environ.get("SLURMGEN_STEP_INDEX", "-"), os.environ.get("SLURM_RESTART_COUNT") or "0"
    if os.environ.get("RANK") == "0":
        with open(path, "a") as out:
            out.write(f"{index} {restarts}\n")
    if wait and index == "1" and restarts == "0":
        print(f"rank {os.environ.get('RANK')} waiting", flush=True)
        time.sleep(300)
        return 1  # never reached in the tests: the preemption's stop ends the step first
    return 0


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "steps":
        return steps(argv[1], argv[2:] == ["wait"])
    if mode == "fail-alone":
        return fail_alone(int(argv[1]), int(argv[2]), argv[3])
    if mode == "lines":
        lines(int(argv[1]), int(argv[2]), argv[3])
        return 0
    if mode == "fail":
        return fail(int(argv[1]), int(argv[2]))
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
