"""What the tests of the remote transport and snapshots share: a real sshd on loopback (tests/ssh_server.py), and
the test cluster's login node behind a bastion (`login`; its helpers are in cluster_login.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import SlurmCluster
from ssh_server import Sshd, start_sshd

from remote.cluster_login import SECRET, start_login


@pytest.fixture
def sshd() -> Iterator[Sshd]:
    server = start_sshd()
    yield server
    server.remove()


@pytest.fixture
def login(slurm_cluster: SlurmCluster) -> Iterator[Sshd]:
    # the login node asks for a TOTP code after the key (PAM, libpam-oath) and is reached through a bastion
    server = start_login(slurm_cluster, otp_secret=SECRET, bastion=True)
    yield server
    server.close_master()
    server.remove()
