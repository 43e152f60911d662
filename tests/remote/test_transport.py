"""The transport to a cluster: the user's own ssh over one master connection, against a real OpenSSH server;
sentinels that a chatty login cannot break; one line for every way ssh fails, never a job state."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ssh_server import Sshd, askpass, prompts, start_sshd

from slurmgen.remote.transport import SSH_FAULTS, SshTransport, TransportError, frame, ssh_fault, unframe

# (what ssh printed, words the line must hold)
FAULTS = [
    (
        "@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n",
        ["host key changed", "ssh-keygen -R login"],
    ),
    ("ssh: Could not resolve hostname nowhere: Name or service not known", ["host unknown", "profile"]),
    ("ssh: connect to host 10.0.0.1 port 22: Connection refused", ["host unreachable"]),
    ("ssh: connect to host 10.0.0.1 port 22: Connection timed out", ["host unreachable", "VPN"]),
    ("root@login: Permission denied (publickey,keyboard-interactive).", ["login refused", "ssh login"]),
    ("Connection closed by 10.0.0.1 port 22", ["connection dropped", "nothing was lost"]),
    ("kex_exchange_identification: read: Connection reset by peer", ["connection dropped"]),
    ("something new", ["ssh failed", "something new", "ssh login"]),
    ("", ["connection dropped", "without a message", "ssh login"]),  # a mux client whose master died
]


@pytest.mark.parametrize(("stderr", "words"), FAULTS)
def test_each_ssh_fault_is_one_line_naming_the_cluster_and_what_to_do(stderr: str, words: list[str]) -> None:
    line = ssh_fault("alpha", "login", stderr)
    assert "\n" not in line and line.startswith("cluster alpha: ")
    for word in words:
        assert word in line
    assert len({meaning for _, meaning, _ in SSH_FAULTS}) >= 5


def test_login_noise_never_reaches_the_parser() -> None:
    script = frame("printf 'a\\nb\\n'; exit 3", "n0nce")
    done = subprocess.run(
        ["bash", "-c", f"echo 'motd SLURMGEN-END-n0nce 9'; {script}; echo 'logout noise'"],
        capture_output=True,
        check=False,
    )
    assert unframe(done.stdout, "n0nce") == (b"a\nb\n", 3)
    assert unframe(b"banner\nSLURMGEN-BEGIN-n0nce\npartial", "n0nce") is None  # the connection dropped


def close(t: SshTransport) -> None:
    subprocess.run([*t.ssh, *t.options(master=False), "-O", "exit", t.host], capture_output=True, check=False)


def test_many_calls_log_in_once_and_parse_through_a_chatty_login(sshd: Sshd, tmp_path: Path) -> None:
    t = sshd.transport()
    try:
        for i in range(5):
            done = t.run(f"echo out-{i}; cat; exit {i}", stdin=b"in\n")
            assert (done.returncode, done.stdout) == (i, f"out-{i}\nin\n".encode())
        again = sshd.transport()  # another process's transport: the same master
        assert again.run("echo x").stdout == b"x\n"
        assert sshd.accepted() == 1
    finally:
        close(t)


def test_unreachable_and_changed_host_key_are_one_line_each(sshd: Sshd, tmp_path: Path) -> None:
    t = sshd.transport()
    t.run("true")
    close(t)
    sshd.stop()
    with pytest.raises(TransportError) as caught:
        t.run("true")
    assert str(caught.value).startswith("cluster alpha: host unreachable: ssh says")
    sshd.host_key()  # the server comes back with another key
    sshd.start()
    with pytest.raises(TransportError) as caught:
        t.run("true")
    assert "host key changed" in str(caught.value) and "\n" not in str(caught.value)


def test_the_connection_dropping_mid_command_is_one_line(sshd: Sshd, tmp_path: Path) -> None:
    t = sshd.transport()
    t.run("true")
    # the master connection ends while the command runs, as a dropped network would end it
    killer = threading.Timer(1.0, close, (t,))
    killer.start()
    try:
        with pytest.raises(TransportError) as caught:
            t.run("echo started; sleep 20")
        assert str(caught.value).startswith("cluster alpha: ") and "\n" not in str(caught.value)
    finally:
        killer.join()
        close(t)


SECRET = "3132333435363738393031323334353637383930"  # noqa: S105 - the RFC 6238 test key, not a credential


def test_a_second_factor_through_a_bastion_is_asked_once_for_many_processes() -> None:
    server = start_sshd(otp_secret=SECRET, bastion=True)
    env = {**os.environ, "SLURMGEN_SSH_DIR": str(server.root / "c"), **askpass(server.root, SECRET)}
    code = "from slurmgen.remote.transport import SshTransport\nimport sys\n" + (
        "t = SshTransport('alpha', sys.argv[1], persist=30, ssh=('ssh', '-F', sys.argv[2]))\n"
        "print(t.run('echo hello').stdout.decode().strip())\n"
    )
    try:
        for _ in range(5):  # five slurmgen processes
            done = subprocess.run(
                [sys.executable, "-c", code, server.alias, str(server.config)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert (done.returncode, done.stdout.strip()) == (0, "hello"), done.stderr
        assert prompts(server.root) == 1  # the code was asked once
        assert server.accepted() == 1 and server.jump is not None and server.jump.accepted() == 1
        assert "keyboard-interactive" in server.log.read_text()
    finally:
        server.close_master()
        server.remove()
