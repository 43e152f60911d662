"""Replacing a file so that a crash, a kill or a bad input never leaves a half-written one and nothing already on
disk is lost. The one writer every part of slurmgen uses: the CLI (`render -o`, the run directory), the local
runner and the in-task runtime (resume state, requeue requests). Standard library only.

The recipe (rename(2), fsync(2)): write a temporary file in the same directory (same filesystem, so the rename is
atomic), fsync it, rename it over the target, then fsync the directory so the rename itself survives a power
cut. A kill at any moment leaves the old file or the new one; what it can leave is an orphan `.NAME.*.tmp`,
which `sweep` removes.
"""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from collections.abc import Callable


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_pattern(path: str | os.PathLike[str]) -> str:
    """The glob that matches the temporary files a write of ``path`` may leave behind."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{glob.escape(name)}.*.tmp")


def sweep(path: str | os.PathLike[str]) -> list[str]:
    """Remove temporary files an interrupted write left next to ``path``; returns what was removed."""
    removed = []
    for leftover in glob.glob(temp_pattern(path)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(leftover)
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
