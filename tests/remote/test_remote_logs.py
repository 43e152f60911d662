"""A remote job's logs come here in bounded round trips (slurmgen.backends.slurm_ssh.mirror): a log of any size is
printed whole under a memory limit far below it, and the copies equal the cluster's files byte for byte."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from ssh_server import Sshd

from slurmgen.backends.slurm_ssh.mirror import mirror
from slurmgen.remote.transport import LocalTransport, RemoteResult

# The child: mirror the job's files over the test sshd, then print rank 0's log as `slurmgen logs --rank 0` does
# (slurmgen.queries.logs: select, then the Follower's chunks).
CHILD = """
import json, sys
from pathlib import Path
from slurmgen.backends.slurm_ssh.mirror import mirror
from slurmgen.queries.logs import Follower, select
from slurmgen.remote.transport import SshTransport
a = json.loads(sys.argv[1])
t = SshTransport("alpha", a["alias"], persist=30, ssh=("ssh", "-F", a["config"]), environ=a["env"])
copies = Path(a["copies"])
mirror(t, a["remote"], "x-7", copies)
out = sys.stdout.buffer
Follower(out.write, copies).poll(select([copies / "x-7.log"], None, 0))
out.flush()
"""


@pytest.mark.slow
def test_a_remote_log_larger_than_the_memory_limit_is_printed_whole(sshd: Sshd, tmp_path: Path) -> None:
    remote = sshd.root / "logs"
    size = 300 << 20  # against a 500 MB address-space limit: one answer held it twice over (captured, unframed)
    transport = sshd.transport()
    made = transport.run(
        f"mkdir -p {remote}/x-7 && echo batch > {remote}/x-7.log && truncate -s {size - 8} {remote}/x-7/rank-0.log"
        f" && printf 'the end\\n' >> {remote}/x-7/rank-0.log"
    )
    assert made.returncode == 0, made.stderr
    env = {**os.environ, "SLURMGEN_SSH_DIR": str(sshd.root / "c")}
    args = {"alias": sshd.alias, "config": str(sshd.config), "env": env, "remote": str(remote),
            "copies": str(tmp_path / "copies")}  # fmt: skip

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (500 << 20, 500 << 20))

    with (tmp_path / "printed").open("wb") as printed:
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], stdout=printed,
                              stderr=subprocess.PIPE, preexec_fn=limit, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-800:]  # was: MemoryError, nothing printed
    shown = tmp_path / "printed"
    header = b"==> x-7/rank-0.log <==\n"
    assert shown.stat().st_size == len(header) + size
    with shown.open("rb") as read:
        assert read.read(len(header)) == header
        read.seek(-8, os.SEEK_END)
        assert read.read() == b"the end\n"


class Counted:
    """The local transport (a real bash), counting its round trips."""

    def __init__(self) -> None:
        self.inner = LocalTransport("here")
        self.cluster = self.inner.cluster
        self.calls = 0

    def run(self, script: str, stdin: bytes = b"", timeout: float = 120) -> RemoteResult:
        self.calls += 1
        return self.inner.run(script, stdin, timeout)


def test_each_round_trip_brings_at_most_its_limit_and_the_copies_end_equal(tmp_path: Path) -> None:
    remote, copies = tmp_path / "remote", tmp_path / "copies"
    (remote / "x-7").mkdir(parents=True)
    files = {"x-7.log": os.urandom(2500), "x-7/n1.log": os.urandom(1200), "x-7/rank-0.log": os.urandom(4100)}
    for name, data in files.items():
        (remote / name).write_bytes(data)
    transport = Counted()
    assert mirror(transport, str(remote), "x-7", copies, limit=1000) == sum(map(len, files.values()))  # type: ignore[arg-type]
    assert transport.calls == 8  # 7,800 bytes at most 1,000 a round trip, the last one bringing less
    assert {name: (copies / name).read_bytes() for name in files} == files
    with (remote / "x-7/rank-0.log").open("ab") as grown:
        grown.write(b"more\n")
    assert mirror(transport, str(remote), "x-7", copies, limit=1000) == 5  # type: ignore[arg-type]
    assert (copies / "x-7/rank-0.log").read_bytes() == files["x-7/rank-0.log"] + b"more\n"
