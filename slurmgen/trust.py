"""The trust rule: what slurmgen reads back and acts on, and where it writes, on a cluster shared with other users.

Scratch directories, /tmp and group project directories are writable by others. slurmgen writes journals,
ledgers, markers, states and the run history there and later acts on them (resume runs the script a journal
entry names; a requeue marker requeues a job), so a file another user planted must be neither believed nor
written through. The rule, written once here and called by every reader and writer (the CLI, the local runner,
the batch shell, each task, the runtime):

- **Read**: a file is believed only when it is a regular file (not a symbolic link: opened with O_NOFOLLOW),
  owned by this user (effective uid), not writable by group or others, in a directory owned by this user or
  root that is not writable by group (unless it is the user's private group) or others, or else is sticky
  (/tmp: others cannot rename or remove what is ours there, unlink(2) and rename(2) on a sticky directory).
  Anything else is one line naming the path, its owner or mode, and the fix, and is never followed.
- **Write**: a file in a place others may write is opened with O_NOFOLLOW (a planted link, dangling or not,
  fails with ELOOP instead of creating or appending to the file it points at), without O_TRUNC (a planted file
  is checked before a byte of it changes), and kept only when it is a regular file of this user's with one link (a
  hard link to a file of this user's elsewhere would be written through); a directory
  slurmgen creates there must be this user's own directory, not a link.
- **Search**: the search for a `.slurmgen` directory in the parents of the current directory stops at a
  directory this user does not own (a world-writable /tmp or scratch root holds other users' `.slurmgen`).
- **Load**: a resume state that another library reads by its path (torch.load, torch.distributed.checkpoint) is
  read only when the checkpoint directory, and every entry in it, or the plain state file, passes the file rule
  above (a directory in place of the regular file for the checkpoint itself), checked on every rank before
  anything is read. Loading unpickles: DCP reads a checkpoint's `.metadata` with pickle.load
  (torch/distributed/checkpoint/filesystem.py, FileSystemReader.read_metadata) and its byte entries with
  torch.load(weights_only=False) (default_planner.py, DefaultLoadPlanner.load_bytes), and a plain state is read by
  torch.load, whose safe loader can be turned off (weights_only=False): a checkpoint planted in a shared state
  directory (its marker only needs the job id and spec hash, which the rendered script prints) would run its
  author's code in the job. A user who can write neither the file nor the directory that holds it cannot have
  changed its bytes; the saver makes its own files pass (make_private, before the commit), whatever the umask.
  Between the check and the read the object is pinned: opened once, checked through its descriptor (fstat, and
  fstatat relative to it), and read through `/proc/self/fd/N`, so renaming another user's directory into its
  place after the check (possible in a group-writable parent) changes nothing. Why not a digest in the marker:
  whoever can plant a checkpoint can plant a marker with the matching digest; a digest helps only with a key the
  other user cannot read, and that key would be one more file to keep safe and to carry between clusters.
  Ownership is kept by the kernel and costs one stat per file.

Standard library only (the batch shell, each task and `import slurmgen.runtime` use it).
"""

from __future__ import annotations

import contextlib
import enum
import errno
import functools
import os
import stat
from collections.abc import Callable, Iterable, Iterator

from slurmgen.errors import SlurmgenError

WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


class Untrusted(SlurmgenError):
    """A file or directory another user could have planted or changed; the message is one line: path, why, fix."""


READ_CHUNK = 1 << 20


def _uid() -> int:
    return os.geteuid()


def _private_group(gid: int) -> bool:
    return _private_group_of(_uid(), gid)


@functools.lru_cache(maxsize=64)
def _private_group_of(uid: int, gid: int) -> bool:
    """Whether `gid` is this user's private group (named as the user, no other member): with umask 002, the
    usual setting where each user has such a group, slurmgen's own directories are group-writable, and only
    this user is in the group. A lookup that fails (a container without the user's entry) says no. Cached: the
    passwd and group lookups cost more than the rest of a file's check, and a report reads thousands of files."""
    import grp
    import pwd

    try:
        user = pwd.getpwuid(uid).pw_name
        group = grp.getgrgid(gid)
    except (KeyError, OSError):
        return False
    return group.gr_name == user and set(group.gr_mem) <= {user}


def why_not_dir(path: str, info: os.stat_result | None = None) -> str | None:
    """Why directory `path` cannot hold files slurmgen believes, or None when it can."""
    try:
        info = info or os.stat(path)
    except FileNotFoundError:
        return None  # nothing there: nothing planted
    uid = _uid()
    if info.st_uid not in (uid, 0):
        return (f"its directory {path} is owned by uid {info.st_uid}, not by this user (uid {uid}) or root; "
                "use a directory of your own")  # fmt: skip
    loose = info.st_mode & (stat.S_IWOTH if _private_group(info.st_gid) else WRITABLE_BY_OTHERS)
    if loose and not info.st_mode & stat.S_ISVTX:
        return (f"its directory {path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o}) and "
                f"not sticky; `chmod go-w {path}` or use a directory of your own")  # fmt: skip
    return None


class Breach(enum.Enum):
    """What the file rule finds wrong with a file or directory itself (not with the directory that holds it)."""

    LINK = "link"
    KIND = "kind"  # neither a regular file nor, where one is expected, a directory
    OWNER = "owner"
    MODE = "mode"


def breach(path: str, info: os.stat_result, directory: bool = False) -> tuple[Breach, str] | None:
    """The file rule, for `path` by its lstat or fstat: what is wrong with it and the fact that says so (one
    phrase naming the path), or None when it is believed. `directory`: a directory is expected, not a file."""
    if stat.S_ISLNK(info.st_mode):
        return Breach.LINK, f"{path} is a symbolic link"
    if not (stat.S_ISDIR if directory else stat.S_ISREG)(info.st_mode):
        return Breach.KIND, f"{path} is not a {'directory' if directory else 'regular file'}"
    uid = _uid()
    if info.st_uid != uid:
        return Breach.OWNER, f"{path} is owned by uid {info.st_uid}, not by this user (uid {uid})"
    if info.st_mode & WRITABLE_BY_OTHERS:
        return Breach.MODE, f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


# The fix each breach gets, after its fact: for a file slurmgen itself reads back or writes ...
FIX = {
    Breach.LINK: "; remove it",
    Breach.KIND: "; remove it",
    Breach.OWNER: "; remove it or use a directory of your own",
    Breach.MODE: "; `chmod go-w {path}`",
}
# ... and for a resume state, which may well be a colleague's copied checkpoint, to keep rather than remove.
LOAD_FIX = {
    Breach.LINK: "",
    Breach.KIND: "",
    Breach.OWNER: ": not loaded, since loading unpickles it and another user's file could run code; if you trust "
    "it, copy it to a directory of yours",
    Breach.MODE: ": not loaded, since loading unpickles it and another user could have written it; if you trust "
    "it, `chmod -R go-w` it",
}


def why_not_file(path: str, info: os.stat_result) -> str | None:
    """Why the file `path` (its lstat or fstat) is not believed, or None when it is."""
    found = breach(path, info)
    return None if found is None else found[1] + FIX[found[0]].format(path=path)


def _refuse(path: str, why: str, what: str) -> Untrusted:
    return Untrusted(f"{path}: not {what}: {why}" if not why.startswith(path) else f"not {what}: {why}")


def open_read(path: str, what: str = "read", dir_checked: bool = False) -> int | None:
    """A descriptor on `path` once it passed the read rule, None when it does not exist; raises Untrusted.
    `dir_checked`: the caller checked the directory (why_not_dir) once for all the files it reads there."""
    opened = _open_checked(path, what, dir_checked)
    return None if opened is None else opened[0]


def _open_checked(path: str, what: str, dir_checked: bool) -> tuple[int, os.stat_result] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, f"{path} is a symbolic link; remove it", what) from None
        raise
    try:
        info = os.fstat(fd)
        why = why_not_file(path, info)
        if why is None and not dir_checked:
            why = why_not_dir(os.path.dirname(os.path.abspath(path)))
    except BaseException:
        os.close(fd)
        raise
    if why is not None:
        os.close(fd)
        raise _refuse(path, why, what)
    return fd, info


def read_bytes(path: str, what: str = "read", dir_checked: bool = False) -> bytes | None:
    """The bytes of `path` if it passed the read rule, None when it does not exist; raises Untrusted."""
    opened = _open_checked(path, what, dir_checked)
    if opened is None:
        return None
    fd, info = opened
    try:  # os.read of the size fstat gave, and one byte more: one call for a file that did not grow meanwhile
        chunks = [os.read(fd, info.st_size + 1)]
        while len(chunks[-1]) > 0 and sum(map(len, chunks)) > info.st_size:
            chunks.append(os.read(fd, READ_CHUNK))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_or_warn(path: str, warn: Callable[[str], object], what: str = "read", dir_checked: bool = False
                 ) -> bytes | None:  # fmt: skip
    """As read_bytes, but a file that fails the rule is named to `warn` and taken as absent (in-job readers
    must not die of another user's file)."""
    try:
        return read_bytes(path, what, dir_checked)
    except Untrusted as exc:
        warn(f"slurmgen: {exc}")
        return None


def believed(path: str, warn: Callable[[str], object]) -> bool:
    """Whether `path` exists and passes the read rule (a marker whose presence is the message)."""
    fd = None
    try:
        fd = open_read(path, "believed")
    except Untrusted as exc:
        warn(f"slurmgen: {exc}")
    except OSError:
        return False
    if fd is None:
        return False
    os.close(fd)
    return True


def open_write(path: str, append: bool = True, mode: int = 0o600, readable: bool = False) -> int:
    """A descriptor to write `path` (created if missing), never through a link and never onto another user's
    file: O_NOFOLLOW, no O_TRUNC before the check (the caller truncates with ftruncate if it wants).
    Raises Untrusted for a planted link or file."""
    flags = os.O_RDWR if readable else os.O_WRONLY
    flags |= os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        # ELOOP: O_NOFOLLOW met a link. EACCES: Linux's fs.protected_symlinks / protected_regular refused a link
        # or another user's file in a sticky directory (proc(5)); said the same way, with what is there.
        with contextlib.suppress(OSError):
            if exc.errno in (errno.ELOOP, errno.EACCES) and (why := why_not_file(path, os.lstat(path))):
                raise _refuse(path, why, "written") from None
        raise
    info = os.fstat(fd)
    found = breach(path, info)
    if found is not None and found[0] is not Breach.MODE:  # our own file with a loose mode is ours
        os.close(fd)
        raise _refuse(path, found[1] + FIX[found[0]].format(path=path), "written")
    if info.st_nlink > 1:
        # A hard link another user made to a file of ours elsewhere passes the owner check: writing would change
        # that file. Linux refuses such a link where fs.protected_hardlinks is 1 (proc(5)); not every node sets it.
        os.close(fd)
        raise _refuse(path, f"{path} has {info.st_nlink} hard links, so it is also a file elsewhere; remove it",
                      "written")  # fmt: skip
    return fd


def write_whole(path: str, data: bytes, mode: int = 0o600) -> None:
    """Replace the contents of `path` in place (a small mark rewritten often): checked, then truncated."""
    fd = open_write(path, append=False, mode=mode)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, data)
    finally:
        os.close(fd)


def own_dir(path: str, mode: int = 0o755) -> None:
    """Make sure `path` is a directory of this user's (created with its parents if missing, mode at most
    `mode`): a directory another user created in its place, or a link to one, is refused (Untrusted)."""
    os.makedirs(path, mode=mode, exist_ok=True)
    info = os.lstat(path)
    uid = _uid()
    if stat.S_ISLNK(info.st_mode):
        raise Untrusted(f"{path}: not used: it is a symbolic link; remove it")
    if not stat.S_ISDIR(info.st_mode):
        raise Untrusted(f"{path}: not used: it is not a directory; remove it")
    if info.st_uid != uid:
        raise Untrusted(f"{path}: not used: it is owned by uid {info.st_uid}, not by this user (uid {uid}); remove "
                        "it or choose another output directory")  # fmt: skip


def private_dir(path: str) -> None:
    """Make `path` this user's private directory (0700), or make sure the one already there is. For a name anyone
    can compute in a place anyone can write (/dev/shm, sticky): another user who made it first, or a link or a
    directory others may write, would feed slurmgen the files in it. Refused with one line naming the path, its
    owner and mode, and the fix (Untrusted); in a sticky place nobody else can rename or remove it once it is
    ours (unlink(2), rename(2)), so one check when it is first used holds for the job."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    found = breach(path, info, directory=True)
    if found is None:
        return
    mode = f"mode {stat.S_IMODE(info.st_mode):o}"
    facts = {Breach.MODE: "", Breach.OWNER: f" ({mode})"}.get(found[0], f" (owner uid {info.st_uid}, {mode})")
    fix = (f"; `chmod 700 {path}`" if found[0] is Breach.MODE else
           f"; remove it (its owner or root: `rm -r {path}`): another user may have made it to steer this job"
           )  # fmt: skip
    raise Untrusted(f"not used: {found[1]}{facts}{fix}")


def owned_by_me(path: str) -> bool:
    """Whether directory `path` is this user's (the `.slurmgen` search stops at the first that is not)."""
    try:
        return os.stat(path).st_uid == _uid()
    except OSError:
        return False


def _check_load(info: os.stat_result, path: str, directory: bool) -> None:
    found = breach(path, info, directory)
    if found is not None:
        raise Untrusted(found[1] + LOAD_FIX[found[0]])


def _open_load(path: str, flags: int) -> int:
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
    """A path to read checkpoint directory `path` through, once it and what it holds passed the load rule: every
    entry, or only `entries` (those that exist). Rank 0 checks every entry before it offers a checkpoint; the
    other ranks check the directory and the files every rank reads: a directory that only this user can write
    holds only what this user put there, and its files' modes were checked by rank 0 (only their owner, this
    user, could change them since), so N ranks need not stat N files each on a shared file system."""
    fd = _open_load(path, os.O_DIRECTORY)
    try:
        _check_load(os.fstat(fd), path, directory=True)
        present = sorted(os.listdir(fd))
        names = present if entries is None else [entry for entry in entries if entry in present]
        for entry in names:
            _check_load(os.stat(entry, dir_fd=fd, follow_symlinks=False), os.path.join(path, entry), directory=False)
        yield _through(fd, path)
    finally:
        os.close(fd)


@contextlib.contextmanager
def pinned_file(path: str) -> Iterator[str]:
    """A path to read the plain state file `path` through, once it passed the load rule."""
    fd = _open_load(path, 0)
    try:
        _check_load(os.fstat(fd), path, directory=False)
        yield _through(fd, path)
    finally:
        os.close(fd)


def make_private(path: str) -> None:
    """Remove group and other write permission from a checkpoint directory and the files in it (the saver's
    umask may have granted them), so that the load rule accepts what this user wrote."""
    for target in [path, *(os.path.join(path, entry) for entry in os.listdir(path))]:
        info = os.lstat(target)
        if info.st_mode & WRITABLE_BY_OTHERS and not stat.S_ISLNK(info.st_mode):
            os.chmod(target, stat.S_IMODE(info.st_mode) & ~WRITABLE_BY_OTHERS)
