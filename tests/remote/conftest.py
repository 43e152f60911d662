"""What the tests of the remote transport and snapshots share: a real sshd on loopback (tests/ssh_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ssh_server import Sshd, start_sshd


@pytest.fixture
def sshd() -> Iterator[Sshd]:
    server = start_sshd()
    yield server
    server.remove()
