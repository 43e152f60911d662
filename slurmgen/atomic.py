"""Replacing a file so that a crash, a kill or a bad input never leaves a half-written one and nothing already on
disk is lost. The one writer every part of slurmgen uses: the CLI (`render -o`, the run directory), the local
runner and the in-task runtime (resume state, requeue requests). Standard library only.

The recipe (rename(2), fsync(2)): write a temporary file in the same directory (same filesystem, so the rename is
atomic), fsync it, rename it over the target, then fsync the directory so the rename itself survives a power
cut. A kill at any moment leaves the old file or the new one; what it can leave is an orphan `.NAME.*.tmp`,
which `sweep` removes.

Temporary names are exact: `.NAME.XXXXXXXX.tmp`, the eight characters tempfile.mkstemp draws (its
_RandomNameSequence: lowercase letters, digits and "_"). A looser match (`.NAME.*.tmp`) would also take the
temporary files of another name that merely starts with NAME and a dot (`.ckpt.v2.k3j9x0qa.tmp` is a save of
`ckpt.v2` in progress, not a leftover of `ckpt`).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable

_RANDOM = "[a-z0-9_]{8}"  # what mkstemp puts between prefix and suffix (tempfile._RandomNameSequence)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_pattern(path: str | os.PathLike[str]) -> re.Pattern[str]:
    """The names (in the directory of ``path``) of the temporary files a write of ``path`` may leave behind."""
    name = os.path.basename(os.path.abspath(path))
    return re.compile(rf"\.{re.escape(name)}\.{_RANDOM}\.tmp")


def sweep(path: str | os.PathLike[str], warn: Callable[[str], None] | None = None) -> list[str]:
    """Remove temporary files an interrupted write left next to ``path``; returns what was removed.

    Only regular files and symbolic links are removed (a directory of that name is none of ours). One that cannot
    be removed (an immutable file, a read-only file system, NFS's `.nfsXXXX` of a file still open elsewhere)
    is left in place and named to ``warn``: it costs disk space, never the start of the job."""
    directory = os.path.dirname(os.path.abspath(path))
    pattern = temp_pattern(path)
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return []
    removed = []
    for entry in sorted(entries):
        if not pattern.fullmatch(entry):
            continue
        leftover = os.path.join(directory, entry)
        try:
            if stat.S_ISDIR(os.lstat(leftover).st_mode):
                continue
            os.unlink(leftover)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if warn is not None:
                warn(f"could not remove {leftover}, left by an interrupted write: {exc.strerror or exc}; it stays")
            continue
        removed.append(leftover)
    return removed


def replace_with(path: str | os.PathLike[str], write: Callable[[str], None], mode: int = 0o600) -> int:
    """Make ``path`` hold what ``write(temporary_path)`` writes, atomically and durably; returns the size.

    ``write`` gets the path of a new, empty file (mode 0600) in the same directory and may write it any way it
    likes (torch.save by path, say). The file is then chmod-ed to ``mode``, fsynced and renamed over ``path``.
    """
    target = os.path.abspath(path)
    directory, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)
    return size


def shell_mode(path: str | os.PathLike[str]) -> int:
    """The mode a shell's `> path` leaves: an existing file keeps its own (the redirection truncates it), a new
    one gets 0666 less the umask (open(2), O_CREAT). For files meant to be shared, such as a rendered script;
    state files stay 0600."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        pass
    umask = os.umask(0o077)  # reading the umask means setting it; put it straight back (the CLI has one thread)
    os.umask(umask)
    return 0o666 & ~umask


def write_bytes(path: str | os.PathLike[str], data: bytes, mode: int = 0o600) -> int:
    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:
            handle.write(data)

    return replace_with(path, write, mode)


def write_text(path: str | os.PathLike[str], text: str, mode: int = 0o600) -> int:
    """``text`` as UTF-8 with Unix line ends, atomically and durably."""
    return write_bytes(path, text.encode("utf-8"), mode)
