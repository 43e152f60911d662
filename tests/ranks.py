"""The tests' one multi-rank launcher: the processes of a local step, started as srun starts tasks.

Each process (a rank, or one command such as torchrun that starts several) runs in its own session, as
slurmstepd runs a task, so a signal to its group reaches it and whatever it started; its stdout and stderr go to
``<dir>/rank<N>.out`` and ``.err``, readable while it runs. `Ranks.results` and `Ranks.wait` wait with one
deadline for all of them; the `launcher` fixture (tests/conftest.py) kills every group still running when the
test ends, pass or fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

WAIT = 180.0  # seconds a launch may take to end when a test does not say: a bound for a hang, not a goal
SHOW = 3000  # characters of a rank's stderr in a failure message


@dataclass
class Result:
    """How one process ended: its exit code, its output, and the seconds from its start to its end."""

    returncode: int
    stdout: str
    stderr: str
    elapsed: float

    def json(self) -> dict[str, Any]:
        """The last JSON line the process printed."""
        lines = [line for line in self.stdout.splitlines() if line.startswith("{")]
        assert lines, f"no JSON line; rc={self.returncode}\nstdout:{self.stdout}\nstderr:{self.stderr[-SHOW:]}"
        return dict(json.loads(lines[-1]))


@dataclass
class Ranks:
    """One launch: its processes in start order (rank N is the Nth started) and their output files in ``dir``."""

    dir: Path
    cwd: Path | None = None  # where the ranks start; None: the test's own working directory
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: list[float] = field(default_factory=list)

    def start(self, argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Start the next rank."""
        rank = len(self.procs)
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / f"rank{rank}.out", "wb") as out, open(self.dir / f"rank{rank}.err", "wb") as err:
            proc = subprocess.Popen(
                list(argv), env=dict(env), cwd=self.cwd, stdout=out, stderr=err, start_new_session=True
            )
        self.procs.append(proc)
        self.started.append(time.monotonic())
        return proc

    def out(self, rank: int = 0) -> str:
        path = self.dir / f"rank{rank}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def err(self, rank: int = 0) -> str:
        path = self.dir / f"rank{rank}.err"
        return path.read_text(errors="replace") if path.exists() else ""

    def line(self, word: str, rank: int = 0) -> list[str]:
        """The words of the last line of the rank's stdout that starts with ``word``."""
        found = [line.split() for line in self.out(rank).splitlines() if line.startswith(word + " ")]
        assert found, f"no {word} line from rank {rank}:\n{self.out(rank)[-2000:]}\n{self.err(rank)[-SHOW:]}"
        return found[-1]

    def wait_for(self, text: str, rank: int = 0, timeout: float = 120) -> None:
        """Until ``text`` is in the rank's output; fails when the rank ends without it or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while text not in self.out(rank):
            if time.monotonic() > deadline or self.procs[rank].poll() is not None:
                raise AssertionError(f"no {text!r} from rank {rank}:\n{self.out(rank)}\n{self.err(rank)[-SHOW:]}")
            time.sleep(0.02)

    def signal(self, sig: int, rank: int = 0) -> None:
        """As slurmstepd signals a task: every process of the rank's group."""
        os.killpg(self.procs[rank].pid, sig)

    def wait(self, timeout: float = WAIT) -> list[int]:
        """Every rank's exit code; raises subprocess.TimeoutExpired when one is still running at the deadline."""
        deadline = time.monotonic() + timeout
        return [p.wait(timeout=max(deadline - time.monotonic(), 1)) for p in self.procs]

    def results(self, timeout: float = WAIT) -> list[Result]:
        """Every rank's `Result`; a rank still running at the deadline is a hang: all are killed, the test fails."""
        deadline = time.monotonic() + timeout
        ended = []
        for rank, proc in enumerate(self.procs):
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.kill()
                pytest.fail(f"pid {proc.pid} still running after {timeout}s (a hang)\n{self.err(rank)[-SHOW:]}")
            ended.append(time.monotonic())
        return [
            Result(proc.returncode, self.out(rank), self.err(rank), end - self.started[rank])
            for rank, (proc, end) in enumerate(zip(self.procs, ended, strict=True))
        ]

    def calls(self) -> list[str]:
        """The commands a recording scontrol (`recording_scontrol`) was asked that act: `show job` is left out."""
        path = self.dir / "scontrol.calls"
        lines = path.read_text().splitlines() if path.exists() else []
        return [line for line in lines if "show job" not in line]

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the group: the rank and anything it started
                proc.wait()


LaunchT = TypeVar("LaunchT", bound=Ranks)


class Launcher:
    """Makes the launches of one test, each in its own directory under ``root``, and kills what is left of them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.launched: list[Ranks] = []

    def next_dir(self) -> Path:
        return self.root / f"launch{len(self.launched)}"

    def new(self, cwd: Path | None = None) -> Ranks:
        return self.add(Ranks(self.next_dir(), cwd))

    def add(self, launch: LaunchT) -> LaunchT:
        """Take a launch made by the test (a `Ranks` of its own kind) into the teardown."""
        launch.dir.mkdir(parents=True, exist_ok=True)
        self.launched.append(launch)
        return launch

    def kill(self) -> None:
        for launch in self.launched:
            launch.kill()


def recording_scontrol(bin_dir: Path) -> Path:
    """An `scontrol` in ``bin_dir`` that only appends its arguments to $SCONTROL_CALLS (see `Ranks.calls`)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    fake = bin_dir / "scontrol"
    fake.write_text('#!/bin/bash\necho "$@" >> "$SCONTROL_CALLS"\n')
    fake.chmod(0o755)
    return fake
