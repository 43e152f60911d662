"""The program's uncaught exception, recorded by slurmgen's start-up hook when it is raised (slurmgen/task/
program_error.py): real Python processes with the hook first on their path, the supervisor's unnamed file."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from slurmgen import contract
from slurmgen.task.program_error import ProgramError, parse
from slurmgen.task.python_hook import hook_path

# Raises, then spends 2 s in an atexit hook (as a tracker's finish does) before the interpreter exits.
RAISES_THEN_WAITS = """
import atexit, os, time
print("seen:", os.environ.get("SLURMGEN_ERROR_FD"), flush=True)  # the program's own children must not inherit it
atexit.register(time.sleep, 2.0)
raise ValueError("bad batch\\nsecond line")
"""
THREAD_RAISES = """
import threading
t = threading.Thread(target=lambda: 1 / 0, name="loader")
t.start(); t.join()
"""


def run_hooked(code: str) -> tuple[ProgramError, subprocess.CompletedProcess[str], float]:
    errors = ProgramError()
    env = hook_path(errors.env({k: v for k, v in os.environ.items() if k != "PYTHONPATH"}))
    assert env[contract.ERROR_FD] == str(errors.fd)
    os.set_inheritable(errors.fd, True)
    done = subprocess.run([sys.executable, "-c", code], env=env, pass_fds=(errors.fd,), capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    return errors, done, time.time()


def test_an_uncaught_exception_is_recorded_when_raised_before_atexit_runs() -> None:
    errors, done, ended = run_hooked(RAISES_THEN_WAITS)
    try:
        assert done.returncode == 1 and "ValueError: bad batch" in done.stderr, done.stderr  # the traceback stays
        raised = errors.raised()
        assert raised is not None and (raised.error, raised.thread) == ("ValueError: bad batch", "MainThread")
        assert ended - raised.time >= 2.0  # recorded before the atexit wait, not at the exit
        assert done.stdout == "seen: None\n", done.stdout
    finally:
        errors.close()


def test_a_threads_exception_is_recorded_with_its_thread_and_an_exit_is_not() -> None:
    errors, done, _ = run_hooked(THREAD_RAISES)
    try:
        raised = errors.raised()
        assert done.returncode == 0 and "ZeroDivisionError" in done.stderr, done.stderr
        assert raised is not None and (raised.error, raised.thread) == ("ZeroDivisionError: division by zero", "loader")
    finally:
        errors.close()
    errors, done, _ = run_hooked("import sys; sys.exit(3)")
    try:
        assert done.returncode == 3 and errors.raised() is None
    finally:
        errors.close()


def test_what_is_not_the_hooks_line_is_not_believed() -> None:
    assert parse(b"") is None and parse(b"not json\n") is None and parse(b"[1]\n") is None
    assert parse(b'{"error": 3, "time": 1.0}\n') is None and parse(b'{"error": "E", "time": true}\n') is None
    found = parse(b'{"error": "E: x", "time": 5, "thread": "MainThread"}\n{"error": "later"}\n')
    assert found is not None and (found.error, found.time) == ("E: x", 5.0)
