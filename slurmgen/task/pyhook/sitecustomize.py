"""Runs at the start of a Python program that slurmgen's supervisor started under ``preemption.handler: program``,
or under the hang watchdog (then it registers faulthandler: ``_register_stacks``), and in every Python program the
supervisor starts, to record its uncaught exception as it is raised (``_record_errors``).

The supervisor starts the program with the preemption signal blocked and its action the default, so
``signal.getsignal`` reports SIG_DFL (CPython reads the OS action at start-up) and a program that installs its
handler only where none is set (Lightning's SignalConnector) installs it. A signal sent before then waits, pending.
Here ``signal.signal`` is wrapped: once the program installs a handler (or SIG_IGN) for that signal, the signal is
unblocked in the main thread, and a pending one reaches the new handler at once. Then the wrapper steps aside.

Python's ``site`` imports the first ``sitecustomize`` on sys.path; this one then takes its directory off sys.path
and PYTHONPATH (the program's own children must not load it) and imports the next one, if any, so a site's or an
environment's own sitecustomize still runs. Standard library only; written for every Python 3 a program may use.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from typing import Any

_SIGNAL_VAR = "SLURMGEN_UNBLOCK_ON_HANDLER"  # slurmgen.contract.UNBLOCK_ON_HANDLER
_STACKS_FD_VAR = "SLURMGEN_STACKS_FD"  # slurmgen.contract.STACKS_FD
_STACKS_SIGNAL_VAR = "SLURMGEN_STACKS_SIGNAL"  # slurmgen.contract.STACKS_SIGNAL
_ERROR_FD_VAR = "SLURMGEN_ERROR_FD"  # slurmgen.contract.ERROR_FD
_HERE = os.path.dirname(os.path.abspath(__file__))


def _install(signum: int) -> None:
    original = signal.signal

    @functools.wraps(original)
    def wrapped(sig: Any, handler: Any) -> Any:
        previous = original(sig, handler)
        if int(sig) == signum and handler is not signal.SIG_DFL:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})  # a pending one is handled now
            signal.signal = original
        return previous

    signal.signal = wrapped  # type: ignore[assignment]  # same call, its result typed loosely


def _register_stacks(fd: int, signum: int) -> None:
    """The hang watchdog's way to this program's stacks without py-spy (slurmgen.task.program_stacks): on
    ``signum`` faulthandler's C handler writes every thread's Python stack to ``fd``, the supervisor's file."""
    import faulthandler

    try:
        os.set_inheritable(fd, False)  # the program's own children must not write into it
        faulthandler.register(signum, file=fd, all_threads=True)
    except (OSError, ValueError, RuntimeError):
        pass  # no dump then: the watchdog says so; the program itself must never fail for it


def _record_errors(fd: int) -> None:
    """The program's first uncaught exception, written to the supervisor's ``fd`` as it is raised, before the
    traceback is printed and before atexit runs (slurmgen.task.program_error): the supervisor then names this
    rank as the one that failed, even when it exits after the peers it took down."""
    import json
    import threading
    import time

    try:
        os.set_inheritable(fd, False)  # the program's own children must not write into it
    except OSError:
        return
    written: list[bool] = []

    def write(kind: Any, value: Any, thread: str) -> None:
        if written or not isinstance(kind, type) or issubclass(kind, (SystemExit, KeyboardInterrupt)):
            return
        written.append(True)
        text = str(value).strip().splitlines()
        error = kind.__name__ + (": " + text[0] if text else "")
        line = json.dumps({"error": error[:300], "time": time.time(), "thread": thread}) + "\n"
        # No record on failure: the supervisor decides by exit codes; the program must never fail for it.
        with contextlib.suppress(OSError):
            os.write(fd, line.encode("utf-8", "replace"))

    previous = sys.excepthook

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        write(kind, value, "MainThread")
        previous(kind, value, tb)

    sys.excepthook = excepthook
    previous_thread = getattr(threading, "excepthook", None)  # from Python 3.8
    if previous_thread is None:
        return

    def thread_hook(args: Any) -> None:
        write(args.exc_type, args.exc_value, getattr(args.thread, "name", "?"))
        previous_thread(args)

    threading.excepthook = thread_hook


def _forget_this_directory() -> None:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != _HERE]
    if parts:
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        os.environ.pop("PYTHONPATH", None)


def _chain() -> None:
    """Import the sitecustomize this one stands in front of, as site would have."""
    this = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401  # the next one on sys.path
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
    finally:
        if this is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = this  # the import that runs this module ends by looking itself up


_name = os.environ.pop(_SIGNAL_VAR, "")
_stacks_fd, _stacks_signal = os.environ.pop(_STACKS_FD_VAR, ""), os.environ.pop(_STACKS_SIGNAL_VAR, "")
_forget_this_directory()
if _name.isdigit():
    _install(int(_name))
if _stacks_fd.isdigit() and _stacks_signal.isdigit():
    _register_stacks(int(_stacks_fd), int(_stacks_signal))
_error_fd = os.environ.pop(_ERROR_FD_VAR, "")
if _error_fd.isdigit():
    _record_errors(int(_error_fd))
_chain()
