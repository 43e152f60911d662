"""Fixtures of the whole local runs' tests (`slurmgen run` of a spec in its own directory)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from local.test_local_handlers import LocalJob


@pytest.fixture
def jobs() -> Iterator[list[LocalJob]]:
    """The local jobs a test starts, in the background. One still running at the end is ended as Ctrl-C ends it
    (the runner ends every process of the job), or killed when its runner has not left within 60 s."""
    started: list[LocalJob] = []
    yield started
    for job in started:
        if job.proc.poll() is None:
            job.proc.send_signal(signal.SIGINT)
            try:
                job.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                job.proc.kill()
                job.proc.wait(timeout=60)
