"""Loading a resume state unpickles it, so only what this user alone could have written is ever read.

torch.distributed.checkpoint reads a checkpoint's `.metadata` with pickle.load (torch/distributed/checkpoint/
filesystem.py, FileSystemReader.read_metadata) and its byte entries with torch.load(weights_only=False)
(default_planner.py, DefaultLoadPlanner.load_bytes): a checkpoint directory planted in a shared state directory
(its marker only needs the job id and spec hash, which the rendered script prints) would run its author's code
in the job. A plain state is read by torch.load, whose safe loader can be turned off (weights_only=False).

The rule, checked on every rank before anything is read: the checkpoint directory, and every entry in it, or
the plain state file, is owned by this process's user (effective uid), is not writable by group or others, and
is what it says (a directory; regular files inside; no symbolic link). A user who can write neither the file
nor the directory that holds it cannot have changed its bytes. The saver makes its own files pass
(commit.py removes group and other write bits before the commit), whatever the umask.

Why not a digest in the marker: whoever can plant a checkpoint can plant a marker with the matching digest; a
digest helps only with a key the other user cannot read, and that key would be one more file to keep safe
and to carry between clusters. Ownership is kept by the kernel and costs one stat per file.

Between the check and the read the object is pinned: the directory (or file) is opened once, checked through
its descriptor (fstat, and fstatat relative to it), and read through `/proc/self/fd/N`, so renaming another
user's directory into its place after the check (possible in a group-writable parent) changes nothing.
Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator

WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


class Untrusted(Exception):
    """A resume state another user could have written; the message is one line naming the file and the fix."""


def _check(info: os.stat_result, path: str, directory: bool) -> None:
    want = stat.S_ISDIR if directory else stat.S_ISREG
    if not want(info.st_mode):
        raise Untrusted(f"{path} is not a {'directory' if directory else 'regular file'}")  # nor ours to read
    uid = os.geteuid()
    if info.st_uid != uid:
        raise Untrusted(
            f"{path} is owned by uid {info.st_uid}, not by this user (uid {uid}): not loaded, since loading "
            "unpickles it and another user's file could run code; if you trust it, copy it to a directory of yours"
        )
    if info.st_mode & WRITABLE_BY_OTHERS:
        raise Untrusted(
            f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o}): not loaded, since "
            "loading unpickles it and another user could have written it; if you trust it, `chmod -R go-w` it"
        )


def _open(path: str, flags: int) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symbolic link
            raise Untrusted(f"{path} is a symbolic link") from None
        raise


def _through(fd: int, path: str) -> str:
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else path  # without /proc: the checked path itself


@contextlib.contextmanager
def pinned_dir(path: str, entries: Iterable[str] | None = None) -> Iterator[str]:
    """A path to read checkpoint directory `path` through, once it and what it holds passed the rule: every
    entry, or only `entries` (those that exist). Rank 0 checks every entry before it offers a checkpoint; the
    other ranks check the directory and the files every rank reads: a directory that only this user can write
    holds only what this user put there, and its files' modes were checked by rank 0 (only their owner, this
    user, could change them since), so N ranks need not stat N files each on a shared file system."""
    fd = _open(path, os.O_DIRECTORY)
    try:
        _check(os.fstat(fd), path, directory=True)
        present = sorted(os.listdir(fd))
        names = present if entries is None else [entry for entry in entries if entry in present]
        for entry in names:
            _check(os.stat(entry, dir_fd=fd, follow_symlinks=False), os.path.join(path, entry), directory=False)
        yield _through(fd, path)
    finally:
        os.close(fd)


@contextlib.contextmanager
def pinned_file(path: str) -> Iterator[str]:
    """A path to read the plain state file `path` through, once it passed the rule."""
    fd = _open(path, 0)
    try:
        _check(os.fstat(fd), path, directory=False)
        yield _through(fd, path)
    finally:
        os.close(fd)


def make_private(path: str) -> None:
    """Remove group and other write permission from a checkpoint directory and the files in it (the saver's
    umask may have granted them), so that the loader's rule accepts what this user wrote."""
    for target in [path, *(os.path.join(path, entry) for entry in os.listdir(path))]:
        info = os.lstat(target)
        if info.st_mode & WRITABLE_BY_OTHERS and not stat.S_ISLNK(info.st_mode):
            os.chmod(target, stat.S_IMODE(info.st_mode) & ~WRITABLE_BY_OTHERS)
