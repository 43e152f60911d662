"""Where sharded checkpoints live, which ones are complete, and the file-system steps that make one durable.

Next to the plain state file `<dir>/<name>` (written by rank 0 alone, runtime/state.py), sharded checkpoints are
directories named by a sequence number:

    <dir>/<name>.000007/                  complete: every rank's shards, DCP's `.metadata`, and MARKER
    <dir>/.<name>.000008.<token>.tmp/     a save in progress, or a checkpoint being deleted

A directory is complete only under its final name *and* with MARKER inside: it gets that name by one atomic
rename, made after every shard, the metadata and MARKER were fsynced. Removing an old checkpoint renames it to
a temporary name first, so a kill halfway through a delete never leaves a partial directory under a complete
name. Whatever carries a temporary name is swept at the next start. Temporary names are matched exactly
(`.<name>.<seq>.<8 hex digits>.tmp`; the plain state's are slurmgen/atomic.py's): a looser pattern would take
the saves in progress of another name that starts with `<name>.` in the same directory.

Standard library only (and slurmgen.atomic's fsync), pure where it can be: the name helpers take the entries
of the directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable

from slurmgen import contract
from slurmgen.atomic import fsync_dir
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.job_context.values import Malformed

MARKER = "slurmgen.json"  # whose checkpoint this is; written last, before the rename
SEQ_WIDTH = 6


def complete_name(name: str, seq: int) -> str:
    return f"{name}.{seq:0{SEQ_WIDTH}d}"


def temp_name(name: str, seq: int) -> str:
    """A fresh temporary name for checkpoint `seq` (unique: a token, so a stale one is never reused)."""
    return f".{name}.{seq:0{SEQ_WIDTH}d}.{secrets.token_hex(4)}.tmp"


def _patterns(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    quoted = re.escape(name)
    seq = rf"(\d{{{SEQ_WIDTH},}})"
    return re.compile(rf"{quoted}\.{seq}"), re.compile(rf"\.{quoted}\.{seq}\.[0-9a-f]{{8}}\.tmp")


def complete_seqs(name: str, entries: Iterable[str]) -> list[int]:
    """Sequence numbers of the entries named like a complete checkpoint, oldest first (names only)."""
    final, _ = _patterns(name)
    return sorted(int(m.group(1)) for entry in entries if (m := final.fullmatch(entry)))


def next_seq(name: str, entries: Iterable[str]) -> int:
    """One past every sequence number in use, complete or temporary."""
    final, temp = _patterns(name)
    used = [0]
    for entry in entries:
        match = final.fullmatch(entry) or temp.fullmatch(entry)
        if match:
            used.append(int(match.group(1)))
    return max(used) + 1


def keep_count(keep: int | None, environ: JobContext) -> int:
    """How many complete sharded checkpoints to keep: the argument, else SLURMGEN_KEEP, else 2."""
    value = keep if keep is not None else environ.keep
    if isinstance(value, Malformed) or value < 1:
        source = "Preemption(keep=...)" if keep is not None else contract.KEEP
        raise RuntimeSetupError(f"{source}={str(value)!r}: the number of checkpoints to keep must be an integer >= 1")
    return value


def to_prune(seqs: Iterable[int], keep: int) -> list[int]:
    """The sequence numbers to delete so that the newest `keep` remain."""
    ordered = sorted(seqs)
    return ordered[: max(len(ordered) - keep, 0)]


def is_temp(name: str, entry: str) -> bool:
    return _patterns(name)[1].fullmatch(entry) is not None


def list_dir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def complete_dirs(directory: str, name: str) -> list[tuple[int, str]]:
    """(seq, path) of the complete checkpoints in `directory`, oldest first: final name and MARKER present."""
    found = []
    for seq in complete_seqs(name, list_dir(directory)):
        path = os.path.join(directory, complete_name(name, seq))
        if os.path.isfile(os.path.join(path, MARKER)):
            found.append((seq, path))
    return found


def tree_size(path: str) -> int:
    """Bytes in the files under `path` (what the checkpoint occupies, apart from file-system blocks)."""
    total = 0
    for root, _, files in os.walk(path):
        for file in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, file)).st_size
    return total


def remove(directory: str, name: str, seq: int) -> None:
    """Delete a complete checkpoint: rename it to a temporary name (atomic), then remove the tree."""
    doomed = os.path.join(directory, temp_name(name, seq))
    try:
        os.rename(os.path.join(directory, complete_name(name, seq)), doomed)
    except FileNotFoundError:
        return
    fsync_dir(directory)  # the old name is gone for good before a single file of it is
    shutil.rmtree(doomed, ignore_errors=True)


def sweep_dirs(directory: str, name: str, warn: Callable[[str], None] | None = None) -> list[str]:
    """Remove temporary checkpoint directories (an interrupted save or delete); returns what was removed.

    One that cannot be removed entirely (an immutable file, a read-only file system, NFS's `.nfsXXXX` of a file
    still open on a dead node) stays, named to ``warn``: it costs disk space, never the start of the job."""
    removed = []
    for entry in sorted(list_dir(directory)):
        path = os.path.join(directory, entry)
        if not (is_temp(name, entry) and os.path.isdir(path) and not os.path.islink(path)):
            continue
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            shutil.rmtree(path, ignore_errors=True)  # what can go, goes
            if os.path.lexists(path):
                if warn is not None:
                    where = os.path.join(path, exc.filename) if exc.filename else path  # rmtree names it relative
                    reason = exc.strerror or exc
                    warn(f"could not remove {path}, left by an interrupted save: {where}: {reason}; it stays")
                continue
        removed.append(path)
    return removed
