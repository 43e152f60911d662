"""Work over many independent items (a sweep's thousands of run histories) spread over this machine's CPUs.

`slurmgen report` of a 10,000-point sweep reads 20,000 small files and makes 10,000 reports: about 2.5 s of one
CPU (bench/report.py). The points are independent, so from FANOUT_FROM items on they are split into one span per
CPU this process may use (os.sched_getaffinity), each made in a forked child (the children inherit the work by
fork: only the results are pickled back). Fewer items, one CPU, or a platform without fork: in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

FANOUT_FROM = 2000  # items; below this the fork and the pickling cost more than they spare
MAX_PROCESSES = 8

_work: Callable[[int, int], Sequence[Any]] | None = None  # the work of the pool being run, inherited by fork


def _span(bounds: tuple[int, int]) -> Sequence[Any]:
    assert _work is not None
    return _work(*bounds)


def processes() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_PROCESSES))


def spread(count: int, work: Callable[[int, int], Sequence[T]], workers: int | None = None) -> list[T]:
    """work(start, stop) over range(count) in consecutive spans, their results joined in order: the same list
    as work(0, count), made in forked children when `count` is large and there is more than one CPU."""
    n = processes() if workers is None else workers
    if count < FANOUT_FROM or n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return list(work(0, count))
    global _work
    bounds = [(count * i // n, count * (i + 1) // n) for i in range(n)]
    _work = work
    try:  # the first span here, meanwhile: one child fewer, and its results need no pickling
        with ProcessPoolExecutor(max_workers=n - 1, mp_context=multiprocessing.get_context("fork")) as pool:
            others = pool.map(_span, bounds[1:])
            first = list(work(*bounds[0]))
            return first + [item for part in others for item in part]
    finally:
        _work = None
