"""How commands reach a cluster: this machine, or the user's own OpenSSH client with one shared connection.

Why the system `ssh` and no Python SSH library: everything in `~/.ssh/config` then works unchanged (ProxyJump,
keys, agents, certificates, Kerberos, hardware keys), and only OpenSSH can share one authenticated connection
between processes (ControlMaster, ssh_config(5)); paramiko cannot reuse an OpenSSH master (paramiko #852).

One connection per cluster: the first command that finds no master opens one on the user's terminal
(`ssh -f -N -o ControlMaster=yes`), where the password, one-time code or key touch is asked once; every later call,
from any slurmgen process, goes through it with `ControlMaster=no` and `BatchMode=yes`, so it never prompts. It
stays open `ControlPersist` seconds after its last use (the profile's `control_persist`, default 600).

A remote command is a bash script; what it prints is framed by sentinels carrying a fresh nonce, so a login banner
or an `echo` in the cluster's `.bashrc` never reaches a parser.

Whatever the user's login shell: sshd runs the command ssh sends through it (`$SHELL -c`, sshd(8) LOGIN PROCESS),
and tcsh, csh and fish parse quotes, newlines, `$(...)` and `!` their own way (tcsh stops at a newline inside
quotes: "Unmatched \"'\"."). So what reaches the login shell is one fixed line every shell reads alike (`exec bash
--norc -c` and a single-quoted word without a newline or `!`); that bash reads the script itself first from stdin,
byte by byte (`dd bs=1`, so that no byte of the caller's data behind it is taken), and the caller's data follows
the script on the same stdin.

Slurm's commands only on a login profile's PATH (`module load slurm` in `~/.bash_profile`, which a command run over
ssh does not read: bash reads it for a login shell only, bash(1) INVOCATION): when `sbatch` is not on PATH, the
script first reads the profile files a login bash reads, in its order, with their output and stdin away from ours.
"""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import SlurmgenError
from slurmgen.ssh_destination import RULE, is_destination

SSH_FAILED = 255  # ssh's own exit status for its errors (ssh(1) EXIT STATUS); else the remote command's


class TransportError(SlurmgenError):
    """ssh could not carry the command: never a job state. One line: the cluster, ssh's own error, what to do."""


@dataclass(frozen=True)
class RemoteResult:
    returncode: int
    stdout: bytes  # between the sentinels only
    stderr: str


# (what ssh says, what it means, what to do): ssh's messages from OpenSSH's ssh.c, sshconnect.c and sshconnect2.c.
# The first match wins; the advice names the command the user runs next. {host} is the profile's host.
SSH_FAULTS: tuple[tuple[str, str, str], ...] = (
    (
        "REMOTE HOST IDENTIFICATION HAS CHANGED",
        "host key changed",
        "ask the cluster's admins whether its key changed, then `ssh-keygen -R {host}` and `ssh {host}`",
    ),
    (
        "Host key verification failed",
        "host key not trusted",
        "run `ssh {host}` once on a terminal to check and accept the cluster's host key",
    ),
    ("Could not resolve hostname", "host unknown", "check `host` in the profile and your network (VPN?)"),
    ("Connection refused", "host unreachable", "check that the login node is up and the port is right"),
    ("Connection timed out", "host unreachable", "check your network (VPN?) and the login node"),
    ("No route to host", "host unreachable", "check your network (VPN?) and the login node"),
    ("Network is unreachable", "host unreachable", "check your network (VPN?)"),
    (
        "Permission denied",
        "login refused",
        "the shared connection is gone or your login (password, one-time code, key) was refused: run `ssh {host}` "
        "to check, then the slurmgen command again on a terminal, which asks once",
    ),
    ("Too many authentication failures", "login refused", "run `ssh {host}` to check your keys"),
    ("Connection closed", "connection dropped", "run the command again: nothing was lost or done twice"),
    ("Connection reset", "connection dropped", "run the command again: nothing was lost or done twice"),
    ("Broken pipe", "connection dropped", "run the command again: nothing was lost or done twice"),
    ("closed by remote host", "connection dropped", "run the command again: nothing was lost or done twice"),
)


def ssh_fault(cluster: str, host: str, stderr: str) -> str:
    """One line for an ssh failure (exit 255): the cluster, ssh's own words, what to do. Pure."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not is_destination(host):  # advice is pasted into a shell: it names only a checked host
        host = "HOST"
    for needle, meaning, advice in SSH_FAULTS:
        said = next((line for line in lines if needle in line), None)
        if said is not None:
            return f"cluster {cluster}: {meaning}: ssh says {said!r}; {advice.format(host=host)}"
    if not lines:
        # A client of a shared connection whose master went away mid-command exits 255 without a word: OpenSSH's
        # mux.c (mux_client_request_session) says "Control master terminated unexpectedly" at debug2 only.
        return (
            f"cluster {cluster}: connection dropped: ssh exited without a message; run the command again "
            f"(nothing was lost or done twice), or `ssh {host}` to see why"
        )
    return f"cluster {cluster}: ssh failed: {lines[-1]!r}; run `ssh {host}` to see why"


# What `bash -l` reads, in its order (bash(1) INVOCATION): /etc/profile, then the first of the user's three files.
LOGIN_PROFILE = (
    "if ! command -v sbatch >/dev/null 2>&1; then\n"
    "  [ -r /etc/profile ] && . /etc/profile </dev/null >&2\n"
    '  for _sg_p in ~/.bash_profile ~/.bash_login ~/.profile; do [ -r "$_sg_p" ] && { . "$_sg_p" </dev/null >&2; '
    "break; }; done\n"
    "fi\n"
)


def frame(script: str, nonce: str) -> str:
    """The script (after the login profile when Slurm is not on PATH), its output between two sentinel lines, and
    its exit status on the closing one."""
    return (
        LOGIN_PROFILE + f"printf '\\n%s\\n' 'SLURMGEN-BEGIN-{nonce}'\n"
        f"( {script}\n)\n"
        f"printf '\\n%s %d\\n' 'SLURMGEN-END-{nonce}' \"$?\"\n"
    )


def unframe(output: bytes, nonce: str) -> tuple[bytes, int] | None:
    """The script's own output and status, whatever a login printed around it; None when the end never came
    (the connection dropped before the script ended). Pure."""
    begin = f"\nSLURMGEN-BEGIN-{nonce}\n".encode()
    end = f"\nSLURMGEN-END-{nonce} ".encode()
    start = output.find(begin)
    stop = output.rfind(end)
    if start < 0 or stop < start:
        return None
    body = output[start + len(begin) : stop]
    tail = output[stop + len(end) :].split(b"\n", 1)[0]
    try:
        return body, int(tail)
    except ValueError:
        return None


def remote_command(script: bytes) -> str:
    """The one line the login shell gets, whatever shell it is: bash, reading ``script`` (its length in bytes) from
    stdin first. Pure. `--norc`: a bash that finds itself run by sshd reads ~/.bashrc (bash(1) INVOCATION), and an
    `exec`ed one counts as the session's first shell; a bash login shell has read it already (its PATH is
    inherited), and reading it twice doubled each call (measured: +0.8 s per call with a pyenv init in it)."""
    return f"exec bash --norc -c 'eval \"$(dd bs=1 count={len(script)} 2>/dev/null)\"'"


def last_said(stderr: str) -> str:
    """The last line a remote shell or ssh printed on stderr, for an error line ("" when none). Pure."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


NO_SSH = (
    "ssh (the OpenSSH client) is not on PATH: install it (Debian/Ubuntu: apt install openssh-client; Fedora: dnf "
    "install openssh-clients; macOS has it; Windows: the optional feature OpenSSH Client, or WSL)"
)


def control_dir(environ: Mapping[str, str]) -> Path:
    """Where the master sockets live: a directory of the user's own, mode 0700 (a socket there gives a shell on
    the cluster to whoever can connect to it). Short, as a socket path must fit in 108 bytes (unix(7))."""
    base = environ.get("SLURMGEN_SSH_DIR") or f"/tmp/slurmgen-ssh-{os.getuid()}"
    path = Path(base)
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise TransportError(f"cannot make {path} for ssh's shared connections: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise TransportError(
            f"{path} is not a private directory of yours (mode 0700); remove it or set SLURMGEN_SSH_DIR"
        )
    return path


class SshTransport:
    """Commands on `host` through the user's ssh, over one master connection per cluster."""

    def __init__(
        self,
        cluster: str,
        host: str,
        *,
        persist: int = 600,
        ssh: Sequence[str] = ("ssh",),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not is_destination(host):
            # never handed to ssh (an option word runs its ProxyCommand) nor named in advice to paste
            raise TransportError(f"cluster {cluster}: host {host!r}: {RULE}; fix `host` in its clusters.yaml")
        self.cluster = cluster
        self.host = host
        self.persist = persist
        self.ssh = list(ssh)
        self.environ = dict(os.environ if environ is None else environ)
        self.socket = str(control_dir(self.environ) / "%C")  # %C: hash of host, port, user (ssh_config(5))
        self.opened = False  # this process has seen the master answer: later calls skip `ssh -O check`

    def options(self, *, master: bool) -> list[str]:
        common = ["-o", f"ControlPath={self.socket}", "-o", f"ControlPersist={self.persist}"]
        if master:
            return [*common, "-o", "ControlMaster=yes"]
        return [*common, "-o", "ControlMaster=no", "-o", "BatchMode=yes"]

    def alive(self) -> bool:
        """Whether a master connection for this host answers (`ssh -O check`)."""
        argv = [*self.ssh, *self.options(master=False), "-O", "check", self.host]
        try:
            done = subprocess.run(argv, capture_output=True, env=self.environ, timeout=30, check=False)
        except FileNotFoundError:
            raise TransportError(f"cluster {self.cluster}: {NO_SSH}") from None
        return done.returncode == 0

    def open(self) -> None:
        """Open the master on the user's terminal (stdin, stderr inherited: ssh asks there), or fail in one line.
        `-f` puts it in the background once logged in; `-N` runs no command."""
        if self.alive():
            return
        argv = [*self.ssh, *self.options(master=True), "-f", "-N", self.host]
        # stderr to a file, not a pipe: the backgrounded master keeps it open, and a pipe would never reach its end.
        with tempfile.TemporaryFile() as said:
            done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=said, env=self.environ, check=False)
            said.seek(0)
            text = said.read().decode(errors="replace")
        if done.returncode != 0:
            raise TransportError(ssh_fault(self.cluster, self.host, text))

    def run(self, script: str, stdin: bytes = b"", timeout: float = 120) -> RemoteResult:
        """Run a bash script on the cluster through the master; never prompts. TransportError when ssh fails or the
        connection drops before the script's end (then the caller must assume it may have run)."""
        if not self.opened:
            self.open()
            self.opened = True
        nonce = secrets.token_hex(8)
        framed = frame(script, nonce).encode()
        argv = [*self.ssh, *self.options(master=False), self.host, remote_command(framed)]
        try:
            done = subprocess.run(
                argv, input=framed + stdin, capture_output=True, env=self.environ, timeout=timeout, check=False
            )
        except FileNotFoundError:
            raise TransportError(f"cluster {self.cluster}: {NO_SSH}") from None
        except subprocess.TimeoutExpired:
            raise TransportError(
                f"cluster {self.cluster}: no answer in {timeout:.0f} s; run the command again "
                "(a submission is looked up by its token before any new one)"
            ) from None
        stderr = done.stderr.decode(errors="replace")
        got = unframe(done.stdout, nonce)
        if done.returncode == SSH_FAILED and got is None:
            self.opened = False  # the master may be gone: the next call looks again
            raise TransportError(ssh_fault(self.cluster, self.host, stderr))
        if got is None:
            said = last_said(stderr) or last_said(done.stdout.decode(errors="replace"))  # nologin(8) says it on stdout
            raise TransportError(
                f"cluster {self.cluster}: the command ended early (ssh status {done.returncode})"
                + (f"; the login node said {said!r}" if said else "")
                + f"; run it again (nothing is done twice), or `ssh {self.host}` to see what your login prints"
            )
        return RemoteResult(got[1], got[0], stderr)


class LocalTransport:
    """A profile without `host`: the cluster is this machine; the same scripts run under a local bash."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def run(self, script: str, stdin: bytes = b"", timeout: float = 120) -> RemoteResult:
        nonce = secrets.token_hex(8)
        done = subprocess.run(
            ["bash", "-c", frame(script, nonce)], input=stdin, capture_output=True, timeout=timeout, check=False
        )
        got = unframe(done.stdout, nonce)
        if got is None:
            raise TransportError(f"cluster {self.cluster}: the local shell ended early: {done.stderr.decode()[-200:]}")
        return RemoteResult(got[1], got[0], done.stderr.decode(errors="replace"))


Transport = SshTransport | LocalTransport


def transport_for(cluster: str, host: str | None, persist: int = 600) -> Transport:
    """The transport of a profile. `SLURMGEN_SSH_CONFIG` names an ssh config file to use instead of the user's own
    (`ssh -F`), for tests and for a team's checked-in config."""
    if host is None:
        return LocalTransport(cluster)
    config = os.environ.get("SLURMGEN_SSH_CONFIG")
    return SshTransport(cluster, host, persist=persist, ssh=("ssh", "-F", config) if config else ("ssh",))
