"""The resume state of one job, plain or sharded: what Preemption's save, load and sweep call.

- A plain state (no DTensor, ShardedTensor or Stateful in it) is written by rank 0 alone to one file, atomically
  (runtime/state.py, slurmgen/atomic.py), as before; other ranks return at once.
- A sharded state is written by every rank into a checkpoint directory committed by one rename (commit.py);
  the newest `keep` complete ones are kept.
- Either can be written in the background (`async_=True`): the call copies the state to CPU memory and returns a
  PendingSave; the next save, and the final one of a stop, wait for it first.
- Loading: rank 0 picks the newest complete state (plain file or checkpoint directory) and broadcasts its
  choice; every rank loads it. At the job-keyed default location a state of another job or spec is refused; at
  a path the user named it is resumed, with one line saying whose it is. A job that `slurmgen resume` submitted
  again for a forgotten one (`resume_from`, the old key) starts from the old job's state when it has none.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Protocol

from slurmgen import atomic
from slurmgen.runtime import state as disk
from slurmgen.runtime.checkpoint import commit, dcp_io, layout, loading, state_tree, write_failure
from slurmgen.runtime.checkpoint.background import BackgroundSaves, PendingSave
from slurmgen.runtime.checkpoint.commit import CheckpointError
from slurmgen.runtime.checkpoint.record import SaveRecord
from slurmgen.runtime.checkpoint.settings import StoreSettings
from slurmgen.runtime.peers import Peers

FORMAT = 1


def _no_phase(name: str) -> None:
    pass


def _log(message: str) -> None:
    print(f"slurmgen: {message}", file=sys.stderr, flush=True)


class SaveListener(Protocol):
    """Who hears of every save: each durable one, and each failure (rank 0, already said in one line)."""

    def saved(self, saved: SaveRecord) -> None: ...

    def save_failed(self, error: str, background: bool) -> None: ...


class CheckpointStore:
    def __init__(
        self,
        path: str,
        settings: StoreSettings,
        peers: Peers,
        *,
        listener: SaveListener | None = None,
        phase: dcp_io.Phase | None = None,
    ) -> None:
        self.path = path
        self.directory, self.name = os.path.split(path)
        self.settings = settings
        self.peers = peers
        self.last: SaveRecord | None = None  # the newest save known durable on this rank
        self._listener = listener
        self._failure: CheckpointError | None = None  # a background save's, raised at the next save or wait
        # Called at each phase of a sharded save (dcp_io.PHASES; the two commit phases on rank 0 only), on the
        # thread that saves: where a fault test kills a rank. Nothing by default.
        self._phase: dcp_io.Phase = phase or _no_phase
        self._staging: Any = None  # torch's stager, made by the first background save
        self._background = BackgroundSaves()

    def sweep(self) -> list[str]:
        """Remove what interrupted saves and deletes left (rank 0, at start, before any save). What cannot be
        removed is one warning line each, never a failed start."""
        warn = self._warn
        return layout.sweep_dirs(self.directory, self.name, warn) + atomic.sweep(self.path, warn)

    def _warn(self, message: str) -> None:
        _log(f"warning: {message}")

    # -- saving ------------------------------------------------------------------------------------------------

    def save(self, state: Any, cause: str, *, async_: bool, sharded: bool | None) -> SaveRecord | PendingSave | None:
        started = time.monotonic()
        # One save at a time, in order: a background write finishing after a newer save would overwrite it
        # (plain) or reuse staging buffers still being written (sharded).
        self._wait_and_raise()
        if state_tree.is_sharded(state) if sharded is None else sharded:
            return self._save_sharded(state, cause, async_, started)
        return self._save_plain(state, cause, async_, started)

    def _stager(self) -> Any:
        if self._staging is None:
            self._staging = state_tree.make_stager()
        return self._staging

    def wait(self, *, raise_failure: bool = True) -> SaveRecord | None:
        """Let the save in flight, if any, finish; the newest durable record. A background save that failed
        (already reported when it did) raises its CheckpointError here, once, unless `raise_failure` is False."""
        if raise_failure:
            self._wait_and_raise()
        else:
            self._background.wait_quietly()
            self._failure = None
        return self.last

    def _wait_and_raise(self) -> None:
        self._background.wait_quietly()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise CheckpointError(f"an earlier save in the background failed: {failure}") from None

    def _failed(self, exc: CheckpointError, background: bool) -> None:
        """Every failed save, at once: one line and a run-history event (rank 0); a background one is also kept
        for the next save or wait to raise, since no caller is waiting for it now."""
        if background:
            self._failure = exc
        if self.peers.rank == 0:
            _log(str(exc))
            if self._listener is not None:
                self._listener.save_failed(str(exc), background)

    def _done(self, record: SaveRecord | None) -> SaveRecord | None:
        if record is not None:
            self.last = record
            if self._listener is not None:
                self._listener.saved(record)
        return record

    def _save_plain(self, state: Any, cause: str, async_: bool, started: float) -> SaveRecord | PendingSave | None:
        if self.peers.rank != 0:
            return None
        if not async_:
            return self._write_plain(state, cause, started, None)
        copy = state_tree.snapshot(state, self._stager)
        blocked = time.monotonic() - started
        return self._background.start(lambda: self._write_plain(copy, cause, started, blocked), blocked)

    def _write_plain(self, state: Any, cause: str, started: float, blocked: float | None) -> SaveRecord | None:
        settings = self.settings
        envelope = disk.envelope(state, settings.key, settings.spec_hash, settings.run, cause)
        try:
            size = disk.write_atomic(self.path, envelope, crc32=settings.crc32)
        except write_failure.WriteFailed as exc:
            kept = "the previous state stays" if os.path.isfile(self.path) else "there is no previous state"
            how = "in the background " if blocked is not None else ""
            error = CheckpointError(f"saving the state {how}to {self.path} failed: {exc}; {kept}")
            self._failed(error, background=blocked is not None)
            raise error from None
        duration = time.monotonic() - started
        background = "" if blocked is None else f" in the background, training blocked {blocked:.2f} s"
        _log(f"saved state to {self.path} ({size / 2**20:.1f} MiB in {duration:.2f} s{background}, {cause})")
        record = SaveRecord(
            self.path, "plain", cause, size, duration, duration if blocked is None else blocked, 1, time.time()
        )
        return self._done(record)

    def _save_sharded(self, state: Any, cause: str, async_: bool, started: float) -> SaveRecord | PendingSave | None:
        group = self.peers.save_group()  # made here, on the calling thread, by every rank alike
        resolved = state_tree.resolve_stateful(state)
        blocked = None
        if async_:
            resolved = state_tree.stage(resolved, self._stager())
            blocked = time.monotonic() - started
        rank, world, settings = self.peers.rank, self.peers.world, self.settings
        marker = {
            "format": FORMAT,
            "kind": "sharded",
            "job": settings.key,
            "spec": settings.spec_hash,
            "run": settings.run,
        }

        def job() -> SaveRecord | None:
            try:
                record = commit.save_sharded(
                    resolved, directory=self.directory, name=self.name, group=group, rank=rank,
                    world_size=world, marker={**marker, "cause": cause}, keep=settings.keep, phase=self._phase,
                    started=started, blocked_s=blocked, log=_log, crc32=settings.crc32,
                )  # fmt: skip
            except CheckpointError as exc:
                error = CheckpointError(f"{exc}; the previous checkpoint stays")
                self._failed(error, background=blocked is not None)
                raise error from None
            except Exception as exc:
                if group is None:  # no peers to lose: a plain error
                    raise
                self.peers.lost(exc, "during a sharded save")
            return self._done(record)

        return job() if blocked is None else self._background.start(job, blocked)

    # -- loading -----------------------------------------------------------------------------------------------

    def load(self, into: Any = None) -> Any:
        """Without `into`: the plain state, or None. With `into`: fill it in place; True if a state was found.
        The newest state every rank can read; past a corrupt one, the one before, with a warning (loading.py)."""
        return loading.Loader(self).load(into)
