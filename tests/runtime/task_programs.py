"""Small programs for the log and exit-code tests; no torch, no slurmgen.

lines N WIDTH GO   every rank prints `READY rank=R`, waits for the file GO, then prints N lines
                   `rank=R line=I xxx...` (WIDTH x's) as fast as it can, with print() and PYTHONUNBUFFERED as the
                   job sets it (two writes per line), then `LINES DONE rank=R`
fail RANK CODE     rank RANK prints a traceback-like line to stderr and exits CODE; every other rank waits
"""

from __future__ import annotations

import os
import sys
import time


def lines(count: int, width: int, go: str) -> None:
    rank = int(os.environ.get("RANK", "-1"))
    print(f"READY rank={rank}")
    while not os.path.exists(go):
        time.sleep(0.05)
    tail = "x" * width
    for i in range(count):
        print(f"rank={rank} line={i} {tail}")
    print(f"LINES DONE rank={rank}")


def fail(rank: int, code: int) -> None:
    me = int(os.environ.get("RANK", "-1"))
    print(f"STARTED rank={me}", flush=True)
    if me != rank:
        time.sleep(120)
        return
    time.sleep(2)
    print(f"ValueError: boom at rank {me}", file=sys.stderr, flush=True)
    sys.exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "lines":
        lines(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        fail(int(sys.argv[2]), int(sys.argv[3]))
