"""Which resume states there are, newest first, and whether one looks whole before every rank reads it.

Newest is decided by modification times, all of them stamped by the file server: the plain state file's, and
each sharded checkpoint's MARKER file's (written just before its commit). The marker's own `time` field is the
saving node's clock; compared with a file's mtime (the server's clock) a node clock a few minutes off would
pick the older state. Ties go to the sharded checkpoint with the higher sequence number.

`unusable(...)` is rank 0's look before the others are told which one to read: a sharded checkpoint must pass
the ownership rule (slurmgen/trust.py), have a marker that is a JSON object, a `.metadata` that DCP can read, and every
shard file the metadata points into, at least as long as the data it points at (a truncated shard is found
here, before any rank has filled its state with half of it). Standard library at import.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass
from typing import Any

from slurmgen import trust
from slurmgen.runtime.checkpoint import layout

NONE, PLAIN, SHARDED = 0, 1, 2  # what rank 0 found to resume from (sent to the other ranks as numbers)


@dataclass(frozen=True)
class Candidate:
    kind: int  # PLAIN or SHARDED
    seq: int  # the checkpoint's sequence number; 0 for the plain state
    path: str


def newest_first(directory: str, name: str) -> list[Candidate]:
    """The plain state and the complete sharded checkpoints named `name`, newest first."""
    found: list[tuple[float, int, Candidate]] = []
    for seq, path in layout.complete_dirs(directory, name):
        try:
            mtime = os.lstat(os.path.join(path, layout.MARKER)).st_mtime
        except OSError:
            continue  # gone since it was listed
        found.append((mtime, seq, Candidate(SHARDED, seq, path)))
    plain = os.path.join(directory, name)
    with contextlib.suppress(FileNotFoundError):
        found.append((os.lstat(plain).st_mtime, -1, Candidate(PLAIN, 0, plain)))
    return [candidate for _, _, candidate in sorted(found, key=lambda item: item[:2], reverse=True)]


def planted(candidate: Candidate) -> str | None:
    """Why this candidate is no state at all (a symbolic link, dangling or not: slurmgen never saves one), or
    None. A link in a shared state directory was planted: it is never followed, and ignored with a warning rather
    than a reason to refuse to start (a save renames over it). A file of another user's, or a state of this
    user's that cannot be read, still stops the job (unusable), so that nothing is overwritten unseen."""
    try:
        info = os.lstat(candidate.path)
    except OSError:
        return None
    return f"{candidate.path} is a symbolic link" if stat.S_ISLNK(info.st_mode) else None


def read_marker(path: str) -> dict[str, Any]:
    """A checkpoint's MARKER; ValueError when it is no JSON object."""
    with open(os.path.join(path, layout.MARKER), encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{layout.MARKER} is not a JSON object")
    return data


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def unusable(candidate: Candidate) -> str | None:
    """Why rank 0 will not offer this candidate (one phrase), or None when it looks whole."""
    try:
        if candidate.kind == PLAIN:
            with trust.pinned_file(candidate.path):
                return None
        with trust.pinned_dir(candidate.path) as pinned:
            read_marker(pinned)
            return _shards_missing(pinned)
    except trust.Untrusted as exc:
        return str(exc)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return _first_line(exc)


def _shards_missing(pinned: str) -> str | None:
    from slurmgen.runtime.checkpoint import dcp_safe

    try:
        metadata = dcp_safe.reader(pinned).read_metadata()  # never pickle.load: a copied checkpoint is not ours
    except FileNotFoundError:
        return "its .metadata is missing"
    except Exception as exc:
        return f"its .metadata cannot be read ({_first_line(exc)})"
    needed: dict[str, int] = {}
    for info in (getattr(metadata, "storage_data", None) or {}).values():
        end = int(info.offset) + int(info.length)
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), end)
    for relative, end in sorted(needed.items()):
        try:
            size = os.stat(os.path.join(pinned, relative)).st_size
        except FileNotFoundError:
            return f"its shard {relative} is missing"
        if size < end:
            return f"its shard {relative} is truncated ({size} of at least {end} bytes)"
    return None
