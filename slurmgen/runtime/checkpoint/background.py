"""At most one save in flight on a background thread; a handle that reports it only once it is durable.

The thread is not a daemon: a program that returns from main while a save is being written waits for it at
interpreter exit (threading joins such threads before atexit handlers run), so its last periodic save still
lands. Errors are kept in the handle; `wait_quietly()` (used before the next save) does not raise them: the save
reported its own failure when it happened, and the store (store.py) raises it at the next save or wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from slurmgen.runtime.checkpoint.record import SaveRecord


class PendingSave:
    """A save being written in the background. `wait()` returns its SaveRecord once it is durable."""

    def __init__(self, job: Callable[[], SaveRecord | None], blocked_s: float, name: str) -> None:
        self.blocked_s = blocked_s  # how long the call that started it held the training loop
        self._record: SaveRecord | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(job,), name=name)
        self._thread.start()

    def _run(self, job: Callable[[], SaveRecord | None]) -> None:
        try:
            self._record = job()
        except BaseException as exc:  # kept for wait(); the thread itself must not print a traceback
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> SaveRecord | None:
        """The record once durable (None on ranks that write nothing: a plain save's other ranks).
        Raises what the save raised, or TimeoutError."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the background save is still being written after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._record


class BackgroundSaves:
    """Serialises saves: a new one starts only once the previous one has finished."""

    def __init__(self) -> None:
        self._pending: PendingSave | None = None

    def start(self, job: Callable[[], SaveRecord | None], blocked_s: float) -> PendingSave:
        self.wait_quietly()
        self._pending = PendingSave(job, blocked_s, name="slurmgen-save")
        return self._pending

    def wait_quietly(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending._thread.join()

    def in_flight(self) -> bool:
        return self._pending is not None and not self._pending.done()
