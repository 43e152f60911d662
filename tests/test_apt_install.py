"""The tests' one way to install Debian packages (tests/cluster/apt-install.sh), with the real apt-get: installs
asked for at the same moment wait for each other instead of failing on apt's lock, as the 24.11 and 26.05 clusters'
debootstrap did while the 22.05 cluster installed Slurm on a fresh machine."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from apt_install import APT_INSTALL

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None, reason="needs root and apt-get"),
]

LOCK = Path(os.environ.get("SLURMGEN_APT_LOCK_DIR", "/var/cache/slurmgen")) / "apt.lock"
POLICY = Path("/usr/sbin/policy-rc.d")
NO_SUCH = ("slurmgen-no-such-package-a", "slurmgen-no-such-package-b")


def install(package: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", str(APT_INSTALL), package], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_two_installs_at_once_both_reach_apt_and_neither_meets_its_lock() -> None:
    policy_before = POLICY.exists()
    runs = [install(p) for p in NO_SUCH]  # each updates the lists (no candidate), then fails on its unknown name
    results = [run.communicate(timeout=900) for run in runs]
    for package, run, (_, err) in zip(NO_SUCH, runs, results, strict=True):
        assert run.returncode == 1, err
        assert f"apt-get install {package} failed" in err, err
        assert "Could not get lock" not in err and "Unable to lock" not in err, err
    assert POLICY.exists() == policy_before  # the script's own policy-rc.d went with it


def test_an_install_waits_while_another_holds_the_lock() -> None:
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        installed = subprocess.run(["bash", str(APT_INSTALL), "bash"], capture_output=True, text=True, timeout=60)
        assert installed.returncode == 0, installed.stderr  # nothing to install: no wait, no apt-get
        waiting = install(NO_SUCH[0])
        time.sleep(3)
        assert waiting.poll() is None  # apt-get alone would have failed at once
    _, err = waiting.communicate(timeout=900)
    assert waiting.returncode == 1 and f"apt-get install {NO_SUCH[0]} failed" in err, err
