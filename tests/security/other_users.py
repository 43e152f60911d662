"""Two other local users for the attacks: the planter (uid 65534, through `setpriv`) and a non-root victim (uid 1)
whose code runs in a forked child: root would pass the owner checks the kernel makes, so where ownership matters
the victim is not root."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

import pytest

PLANTER = 65534
VICTIM = 1  # daemon: a plain user that is neither root nor the planter


def need_root() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("acting as two other users needs root and setpriv (util-linux); CI runs these as root")


def plant(script: str, cwd: str = "/") -> None:
    """Run shell ``script`` as the planter."""
    argv = ["setpriv", "--reuid", str(PLANTER), "--regid", str(PLANTER), "--clear-groups", "sh", "-ec", script]
    subprocess.run(argv, check=True, cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": "/"})


def as_victim(act: Callable[[], str]) -> str:
    """What ``act`` returns, run in a forked child as the victim (its gid the same number, no other group). What
    the child needs is imported by the caller first: the victim may not be able to read this interpreter's
    library."""
    import encodings.ascii  # noqa: F401
    import fcntl  # noqa: F401
    import grp  # noqa: F401
    import pwd  # noqa: F401

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgroups([])
            os.setresgid(VICTIM, VICTIM, VICTIM)
            os.setresuid(VICTIM, VICTIM, VICTIM)
            out = act()
        except BaseException as exc:  # the parent's assertion shows it
            out = f"child failed: {type(exc).__name__}: {exc}"
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text
