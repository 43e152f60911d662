"""A value the whole test run computes once, even across pytest-xdist workers (each its own pytest session).

The first worker to ask makes it, under an exclusive lock on a file in the run's shared temporary directory (each
worker's basetemp is popen-gwN inside it), and writes it there as JSON; the others wait on the lock and read it.
For the expensive references several workers need, which are identical by construction: the uninterrupted
weights of a training job, the final weights of a framework's uninterrupted run."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from typing import Any

import pytest


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[], Any]) -> Any:
    shared = tmp_path_factory.getbasetemp()
    if shared.name.startswith("popen-gw"):
        shared = shared.parent
    record = shared / f"once-{name}.json"
    with open(shared / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its worker dies
        if record.exists():
            return json.loads(record.read_text())
        value = make()
        record.write_text(json.dumps(value))
        return value
