"""Why a write of a resume state failed, in words a user can act on: disk full, quota, permission, read-only.

torch.save by path hides the operating system's error: on a full disk its C++ writer raises
`RuntimeError: [enforce fail at inline_container.cc:...] unexpected pos ...` (caffe2/serialize/
inline_container.cc checks the position after each write and has no errno to report). So the cause is taken
from the errno where one exists (an OSError anywhere in the exception's chain), else from the file system
itself, asked while the half-written file still occupies it: os.statvfs(3) for free space and a read-only
mount, access(2) for permission. Standard library only.
"""

from __future__ import annotations

import errno
import os

# Less free than this when a write failed: the disk filled up (torch writes in buffered chunks, so a failed
# write leaves the file system within a few blocks of full).
FULL_BYTES = 1 << 20

_CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
}


class WriteFailed(Exception):
    """A write of a resume state failed; the message is one line that names the cause."""


def _errno(exc: BaseException) -> int | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return current.errno
        current = current.__cause__ or current.__context__
    return None


def _from_file_system(directory: str) -> str | None:
    try:
        stats = os.statvfs(directory)
    except OSError:
        return None
    if stats.f_flag & os.ST_RDONLY:
        return _CAUSES[errno.EROFS]
    free = stats.f_bavail * stats.f_frsize
    if free < FULL_BYTES:
        return f"the disk is full ({free // 1024} KiB free on the file system of {directory})"
    if not os.access(directory, os.W_OK):
        return _CAUSES[errno.EACCES]
    return None


def describe(exc: BaseException, directory: str) -> str:
    """One line: the cause (when it can be told) and the error as raised, first line only."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    raised = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    code = _errno(exc)
    cause = _CAUSES.get(code) if code is not None else None
    cause = cause or _from_file_system(directory)
    return f"{cause} ({raised})" if cause else raised
