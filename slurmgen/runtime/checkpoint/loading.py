"""Loading the resume state: the newest one that every rank can read, falling back past a corrupt one.

    rank 0 lists the states, newest first (candidates.py), skips those that do not look whole or that another
      user could have written, and broadcasts its choice with the number it skipped (a tensor: object
      collectives would need NumPy even for a plain state)
    every rank pins and checks what it will read (slurmgen/trust.py) and reads it; the ranks agree (one all-reduce)
      whether all succeeded; if not, rank 0 chooses again among the rest
    a fallback is one warning on rank 0 naming what was skipped and why and what is resumed instead; nothing
      is deleted (the corrupt state stays for a person to look at)

Without a process group yet (Lightning starts it inside fit(), after the checkpoint path is chosen) every rank
looks for itself: nothing writes the state at start-up. torch is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from typing import Any, Protocol

from slurmgen import trust
from slurmgen.runtime import state as disk
from slurmgen.runtime.checkpoint import candidates, dcp_io, layout, state_tree
from slurmgen.runtime.checkpoint.candidates import NONE, PLAIN
from slurmgen.runtime.checkpoint.commit import CheckpointError
from slurmgen.runtime.checkpoint.settings import StoreSettings
from slurmgen.runtime.peers import Peers

_FOREIGN = object()  # a whole state of another job or spec, at the job-keyed default location: not resumed


class _Unusable(Exception):
    """This state cannot be read (on some rank); the message is one phrase."""


class LoadSource(Protocol):
    """What loading reads of the store that calls it (store.py's CheckpointStore): where, whose, the ranks."""

    directory: str
    name: str
    settings: StoreSettings
    peers: Peers

    def _warn(self, message: str) -> None: ...


class Loader:
    def __init__(self, store: LoadSource) -> None:
        self.store = store

    def load(self, into: Any) -> Any:
        store = self.store
        missing = None if into is None else False
        tried: set[tuple[int, int, int]] = set()
        skipped: list[str] = []
        while True:
            kind, seq, old, skipped_by_rank0 = self._choose(tried, skipped)
            if kind == NONE:
                if skipped or skipped_by_rank0:
                    reasons = "; ".join(skipped) or "see rank 0's log"
                    raise CheckpointError(f"no resume state could be read: {reasons}; each is left in place")
                return missing
            owner = store.settings.resume_from if old and store.settings.resume_from else store.settings.key
            name = f"{owner}.state" if old else store.name
            path = os.path.join(store.directory, name if kind == PLAIN else layout.complete_name(name, seq))
            try:
                loaded = self._plain(path, owner, into) if kind == PLAIN else self._sharded(path, owner, into)
            except _Unusable as exc:
                skipped.append(f"{path} ({exc})")
                continue
            if loaded is _FOREIGN:
                return missing
            if skipped and store.peers.rank == 0:
                store._warn(f"resuming from {path}, not from the newer {'; '.join(skipped)}, which is left in place")
            return loaded

    # -- rank 0's choice ----------------------------------------------------------------------------------------

    def _names(self) -> list[tuple[int, str]]:
        """This job's name, then (`slurmgen resume` of a forgotten job) the old job's."""
        store = self.store
        return [(0, store.name)] + ([(1, f"{store.settings.resume_from}.state")] if store.settings.resume_from else [])

    def _pick(self, tried: set[tuple[int, int, int]], skipped: list[str]) -> tuple[int, int, int]:
        for old, name in self._names():
            for candidate in candidates.newest_first(self.store.directory, name):
                key = (candidate.kind, candidate.seq, old)
                if key in tried:
                    continue
                tried.add(key)
                if (why := candidates.planted(candidate)) is not None:
                    self.store._warn(f"{why}: not a resume state of this user's; ignored, remove it")
                    continue
                reason = candidates.unusable(candidate)
                if reason is None:
                    return key
                skipped.append(f"{candidate.path} ({reason})")
        return NONE, 0, 0

    def _choose(self, tried: set[tuple[int, int, int]], skipped: list[str]) -> tuple[int, int, int, int]:
        """(kind, seq, old, how many rank 0 skipped), the same on every rank."""
        store = self.store
        group = store.peers.side_group()
        kind, seq, old = NONE, 0, 0
        if store.peers.rank == 0 or group is None:
            kind, seq, old = self._pick(tried, skipped)
        if group is None:
            return kind, seq, old, len(skipped)
        import torch
        import torch.distributed as dist

        choice = torch.tensor([kind, seq, old, len(skipped)], dtype=torch.int64)
        try:
            dist.broadcast(choice, src=0, group=group)
        except Exception as exc:
            store.peers.lost(exc, "while choosing the state to resume from")
        kind, seq, old, count = (int(x) for x in choice.tolist())
        tried.add((kind, seq, old))
        return kind, seq, old, count

    def _all_read(self, error: str) -> None:
        """Every rank says whether it could read its part; raises _Unusable on every rank if one could not."""
        group = self.store.peers.side_group()
        failed = bool(error)
        if group is not None:
            import torch
            import torch.distributed as dist

            flag = torch.tensor([int(failed)], dtype=torch.int64)
            try:
                dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
            except Exception as exc:
                self.store.peers.lost(exc, "while loading the resume state")
            failed = bool(flag.item())
        if failed:
            raise _Unusable(error or "another rank could not read it")

    # -- reading ------------------------------------------------------------------------------------------------

    def _plain(self, path: str, owner: str, into: Any) -> Any:
        store = self.store
        data, error = None, ""
        try:
            with trust.pinned_file(path) as pinned:
                data = disk.read(pinned, weights_only=store.settings.weights_only, shown=path)
        except FileNotFoundError:
            error = "it disappeared"
        except trust.Untrusted as exc:
            error = str(exc)
        except (disk.Unreadable, OSError) as exc:
            error = str(exc) if isinstance(exc, disk.Unreadable) else f"{type(exc).__name__}: {exc}"
        self._all_read(error)
        assert data is not None
        if not self._owned(data["slurmgen"], path, "plain", owner):
            return _FOREIGN
        if into is None:
            return data["state"]
        state_tree.fill_in_place(into, data["state"])
        return True

    def _sharded(self, path: str, owner: str, into: Any) -> Any:
        store = self.store
        with contextlib.ExitStack() as stack:
            meta: dict[str, Any] = {}
            pinned, error = path, ""
            try:
                every = store.peers.rank == 0 or store.peers.side_group() is None
                entries = None if every else (".metadata", layout.MARKER)
                pinned = stack.enter_context(trust.pinned_dir(path, entries))
                meta = candidates.read_marker(pinned)
            except trust.Untrusted as exc:
                error = str(exc)
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            self._all_read(error)
            if not self._owned(meta, path, "sharded", owner):
                return _FOREIGN
            if into is None:
                raise CheckpointError(f"{path} is a sharded checkpoint: give the state to fill, pre.load(into=state)")
            target = state_tree.top_level(into)
            group = store.peers.save_group()
            try:
                dcp_io.read(target, pinned, group, store.settings.weights_only)
            except Exception as exc:  # a broken collective (CheckpointException is no Exception, see dcp_io)
                if group is not None:
                    store.peers.lost(exc, "while loading a sharded checkpoint")
                raise _Unusable(f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}") from None
            except BaseException as exc:
                if not dcp_io.is_consistent_failure(exc):
                    raise
                raise _Unusable(dcp_io.describe_failure(exc)) from None
        if isinstance(into, dict):  # tensors were filled in place; plain values at the top were replaced
            into.update(target)
        return True

    def _owned(self, meta: Mapping[str, Any], path: str, kind: str, owner: str) -> bool:
        store = self.store
        job, spec = meta.get("job"), meta.get("spec") or "?"
        foreign = job != owner or bool(store.settings.spec_hash and meta.get("spec") != store.settings.spec_hash)
        ours = f"this is job {store.settings.key} with spec {store.settings.spec_hash or '?'}"
        if foreign and not store.settings.named:
            if store.peers.rank == 0:
                _log(f"not resuming from {path}: it belongs to job {job} with spec {spec}, {ours}")
            return False
        if store.peers.rank == 0:
            what = f"sharded over {meta.get('world_size')} ranks, " if kind == "sharded" else ""
            what += f"job {owner}'s state, " if owner != store.settings.key else ""
            run = int(meta.get("run", 0)) + 1
            whose = f"; it is the state of job {job} with spec {spec}, {ours}" if foreign else ""
            _log(f"resuming from {path} ({what}saved by run {run}, cause {meta.get('cause')}){whose}")
        return True


def _log(message: str) -> None:
    print(f"slurmgen: {message}", file=sys.stderr, flush=True)
