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
from multiprocessing.connection import Connection
from typing import Any, TypeVar

T = TypeVar("T")

FANOUT_FROM = 2000  # items; below this the fork and the pickling cost more than they spare
MAX_PROCESSES = 8


def processes() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_PROCESSES))


def _child(work: Callable[[int, int], Sequence[Any]], bounds: tuple[int, int], out: Connection) -> None:
    try:
        out.send((True, list(work(*bounds))))
    except BaseException as exc:  # the caller raises it
        out.send((False, exc))
    finally:
        out.close()


def spread(count: int, work: Callable[[int, int], Sequence[T]], workers: int | None = None) -> list[T]:
    """work(start, stop) over range(count) in consecutive spans, their results joined in order: the same list
    as work(0, count), made in forked children when `count` is large and there is more than one CPU. One child
    per span (a pool could hand two spans to one child and leave a CPU idle); the first span is made here
    meanwhile, so its results need no pickling. A child's error is raised here."""
    n = processes() if workers is None else workers
    if count < FANOUT_FROM or n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return list(work(0, count))
    fork = multiprocessing.get_context("fork")
    bounds = [(count * i // n, count * (i + 1) // n) for i in range(n)]
    children = []
    for span in bounds[1:]:
        receive, send = fork.Pipe(duplex=False)
        child = fork.Process(target=_child, args=(work, span, send))  # inherited by fork, never pickled
        child.start()
        send.close()
        children.append((child, receive))
    try:
        made = list(work(*bounds[0]))
        for _, receive in children:
            ok, got = receive.recv()
            if not ok:
                raise got
            made += got
        return made
    finally:
        for child, receive in children:
            receive.close()
            if child.is_alive():
                child.terminate()
            child.join()
