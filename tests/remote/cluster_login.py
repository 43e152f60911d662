"""What the tests that reach the test cluster through a real sshd share (the `login` fixture is in conftest.py): a
laptop's environment, the login node's place in the cluster's network, a project to submit, and waiting on a job's
state through the connection."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from conftest import SlurmCluster
from ssh_server import Sshd, askpass, start_sshd

from slurmgen.backends.slurm_ssh.remote_status import remote_states
from slurmgen.remote.transport import SshTransport

SECRET = "3132333435363738393031323334353637383930"  # noqa: S105 - the RFC 6238 test key, not a credential


def client_env(login: Sshd) -> dict[str, str]:
    """A laptop's environment: the login's ssh config, the one-time code through SSH_ASKPASS (counted)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SBATCH"))},
        "SLURMGEN_SSH_CONFIG": str(login.config),
        "SLURMGEN_SSH_DIR": str(login.root / "c"),
        "XDG_CONFIG_HOME": str(login.root / "no-config"),
        "SLURMGEN_HOME": str(login.root / "journal"),
        **askpass(login.root, SECRET),
    }


def login_node(cluster: SlurmCluster) -> tuple[str, str]:
    """The login node's network namespace and address: the first node's, where its Slurm commands reach slurmctld
    over the cluster's bridge as its slurmd does (a small cluster's login node is often a compute node too)."""
    assert cluster.info is not None
    node = cluster.nodes[0]
    return cluster.info.namespaces[node], cluster.node_addrs[node]


def start_login(
    cluster: SlurmCluster, path_prepend: str = "", otp_secret: str | None = None, bastion: bool = False
) -> Sshd:
    """A login node to ``cluster``: an sshd in its first node's network namespace whose commands get the
    cluster's Slurm commands (after ``path_prepend``) and SLURM_CONF; ``otp_secret`` and ``bastion`` as for
    start_sshd."""
    slurm_bin = cluster.env["PATH"].split(":")[0]
    path = f"{path_prepend}:{slurm_bin}" if path_prepend else slurm_bin
    exports = {"SLURM_CONF": str(cluster.conf)}
    return start_sshd(path_prepend=path, exports=exports, otp_secret=otp_secret, bastion=bastion,
                      netns=login_node(cluster))  # fmt: skip


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def project(server: Sshd, folder: str, job: str, program: str, spec: str = "", profile: str = "") -> Path:
    """A git repository on the laptop (not committed yet): train.py (``program``), job.yaml (job ``job``, more
    lines ``spec``) and a clusters.yaml whose profile alpha reaches ``server`` and works in <its root>/work. Its
    20-minute limit keeps the default lead time, so no command adds the note of a lead time cut to fit."""
    repo = server.root / folder
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "train.py").write_text(program)
    (repo / "job.yaml").write_text(f'name: {job}\ncommand: [python3, train.py]\ntime: "20:00"\n{spec}')
    (repo / "clusters.yaml").write_text(f"alpha:\n  host: {server.alias}\n  workdir: {server.root / 'work'}\n{profile}")
    return repo


def logs_of(log_dir: str) -> str:
    return "".join(p.read_text(errors="replace") for p in Path(log_dir).rglob("*.log"))


def wait_state(t: SshTransport, job: str, log_dir: str, want: set[str], timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = remote_states(t, [job], {job: log_dir})[job].state
        if state in want:
            return state
        time.sleep(1)
    raise AssertionError(f"job {job} stayed {state}")
