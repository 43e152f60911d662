"""What slurmgen's store barrier asks of the one c10d store a job has, as the job grows: requests per barrier,
counted on slurmgen's real StoreBarrier with one thread per simulated rank on torch's in-process HashStore,
fitted to a growth exponent and extrapolated to 16,384 ranks.

    python bench/store_scale.py [--ranks 16 64 256 1024]

Rows:
- pass: every rank arrives (the start-up and stop barriers of slurmgen.runtime);
- rank 0 gone (before): every other rank times out and surveys every rank's key itself (the code as it was for
  every size; still so up to store_barrier.SURVEY_ALONE ranks);
- rank 0 gone (now): the same failure as the code does it now.

torch's own rendezvous (TCPStore, one request per rank per key it sets) is torch's and not counted here: slurmgen
adds to it the barrier's four requests per rank, and no key per training step.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurmgen.runtime import store_barrier  # noqa: E402
from slurmgen.runtime.store_barrier import BarrierTimeout, StoreBarrier  # noqa: E402

TARGET = 16384
OPS = ("set", "add", "get", "check", "wait", "compare_set", "delete_key")


class CountingStore:
    """A store that counts the requests made of it (each one a round trip to a TCPStore)."""

    def __init__(self, store: Any) -> None:
        self.store, self.count, self.lock = store, 0, threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if name not in OPS:
            return method

        def counted(*args: Any) -> Any:
            with self.lock:
                self.count += 1
            return method(*args)

        return counted


def barrier_requests(world: int, present: list[int], timeout: float) -> tuple[int, float]:
    from torch._C._distributed_c10d import HashStore

    store = CountingStore(HashStore())

    def rank_main(rank: int) -> None:
        with contextlib.suppress(BarrierTimeout):  # rank 0 gone: every other rank times out, as it should
            StoreBarrier(store, "b/", rank, world, f"h{rank}").wait(timeout, "sync")

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in present]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return store.count, time.perf_counter() - began


def exponent(points: dict[int, float]) -> float:
    (n0, v0), (n1, v1) = min(points.items()), max(points.items())
    return math.log(v1 / v0) / math.log(n1 / n0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[16, 64, 256, 1024])
    sizes = parser.parse_args().ranks
    rows: dict[str, dict[int, float]] = {"pass": {}, "rank 0 gone (before)": {}, "rank 0 gone (now)": {}}
    for n in sizes:
        rows["pass"][n] = barrier_requests(n, list(range(n)), 30.0)[0]
        gone = list(range(1, n))
        keep = store_barrier.SURVEY_ALONE
        store_barrier.SURVEY_ALONE = 1 << 30  # as before: every rank surveys
        rows["rank 0 gone (before)"][n] = barrier_requests(n, gone, 0.5)[0]
        store_barrier.SURVEY_ALONE = keep
        rows["rank 0 gone (now)"][n] = barrier_requests(n, gone, 0.5)[0]
    head = ["store requests per barrier", *(f"{n} ranks" for n in sizes), "exponent", f"at {TARGET:,}"]
    print(" | ".join(head))
    for name, points in rows.items():
        large = {n: v for n, v in points.items() if n > store_barrier.SURVEY_ALONE} or points
        k = exponent(large)
        n1, v1 = max(large.items())
        at = v1 * (TARGET / n1) ** k
        print(" | ".join([name, *(f"{int(points[n]):,}" for n in sizes), f"{k:.2f}", f"{at:,.0f}"]))


if __name__ == "__main__":
    main()
