"""A file the user names on the command line for a result (`render -o FILE`, `report --html FILE`): written whole
by renaming a new file over the name (slurmgen.atomic), so a bad input or a kill never leaves half of it.

The rename decides what is refused first, each in one line naming the option, what is there and the fix: a
directory; a symbolic link, which the rename would replace (a link to /proc/self/fd/1 while stdout is a file
became a regular file and nothing was printed) and which, followed instead, is what the trust rule forbids (another
user's link in a sticky /tmp, slurmgen.trust); a device, FIFO or socket, which the rename would replace (a FIFO
opened for writing would block until a reader came: fifo(7)); another user's file, which rename(2) in a sticky
directory refuses anyway with a bare EPERM.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from slurmgen import trust
from slurmgen.errors import UsageError

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))  # fmt: skip


def refusal(option: str, path: Path, stdout_hint: bool, example: str) -> str | None:
    """Why `option path` cannot be written by renaming over it (one line), or None when it can."""
    fix = ", or -o - for standard output" if stdout_hint else ""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{option} {path}: cannot look at it ({exc.strerror or exc}); give another file name"
    if stat.S_ISDIR(info.st_mode):
        return f"{option} {path}: is a directory; give a file name, e.g. {option} {path / example}"
    if stat.S_ISLNK(info.st_mode):
        return (f"{option} {path}: is a symbolic link (to {os.readlink(path)}), which is never written through nor "
                f"replaced; give the file it points to{fix}")  # fmt: skip
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        return f"{option} {path}: is {kind}, not a regular file; give a file name{fix}"
    if not trust.owned_by_me(str(path)):
        return f"{option} {path}: is owned by uid {info.st_uid}, not by this user; give another file name"
    return None


def write_output(option: str, path: Path, text: str, example: str, stdout_hint: bool = False) -> None:
    """Write `text` to the file the user named with `option`, whole or not at all; UsageError for what is refused
    (see refusal) or cannot be written. The mode is what a shell's `> FILE` leaves (atomic.shell_mode)."""
    from slurmgen.atomic import shell_mode, write_text

    why = refusal(option, path, stdout_hint, example)
    if why is not None:
        raise UsageError(why)
    try:
        write_text(path, text, mode=shell_mode(path))
    except OSError as exc:
        raise UsageError(
            f"{option} {path}: cannot write it ({exc.strerror or exc}); check that the directory exists"
        ) from None
