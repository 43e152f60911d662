"""Debian packages a test needs on this machine, installed through tests/cluster/apt-install.sh: the one place the
tests run apt-get, one install at a time (several pytest-xdist workers ask at once on a fresh machine, and
apt-get fails at once on another's lock instead of waiting)."""

from __future__ import annotations

import subprocess
from pathlib import Path

APT_INSTALL = Path(__file__).resolve().parent / "cluster" / "apt-install.sh"


def apt_install(*packages: str) -> str:
    """Install the packages that are missing (as root); "" when all are installed, else the script's last words."""
    done = subprocess.run(
        ["bash", str(APT_INSTALL), *packages], capture_output=True, text=True, timeout=3600, check=False
    )
    return "" if done.returncode == 0 else f"apt-get install {' '.join(packages)} failed: {done.stderr[-500:]}"
