"""A real OpenSSH server (Debian's openssh-server) on a loopback port, or in a test cluster node's network
namespace on that node's address (the login node of tests/remote/test_remote_cluster.py), started and stopped by
the tests, with its own host key, an authorized key for the test's user, an ssh config file naming it, and its log
(accepted logins).

`ensure_sshd()` installs the package with apt-get when missing, as tests/cluster/up.sh installs Slurm."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from apt_install import apt_install

from slurmgen.remote.transport import SshTransport

SSHD = "/usr/sbin/sshd"


def ensure_sshd() -> None:
    ensure_package("openssh-server", Path(SSHD))  # which brings the client, ssh, with it (a dependency)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sshd:
    root: Path
    port: int
    alias: str = "cluster-a"
    noise: str = "Welcome to the login node! (motd)"
    proc: subprocess.Popen[bytes] | None = None
    extra: list[str] = field(default_factory=list)
    path_prepend: str = ""  # a directory put first on PATH for every command (the login node's Slurm commands)
    exports: dict[str, str] = field(default_factory=dict)  # variables every command gets (SLURM_CONF)
    otp_secret: str | None = None  # hex: a TOTP code through PAM (libpam-oath) after the key, as a second factor
    jump: Sshd | None = None  # reached through this bastion (ProxyJump in the client's config)
    # The network namespace sshd runs in (a test cluster node's: `ip netns`), listening on `address` there; None:
    # this machine's namespace, on loopback.
    netns: str | None = None
    address: str = "127.0.0.1"
    # No ForceCommand: each command runs as sshd runs it, through the user's own login shell (`$SHELL -c`,
    # sshd(8) LOGIN PROCESS): noise, path_prepend and exports do not apply (ForceCommand is bash).
    plain: bool = False
    # Files of this machine its sessions do not see (this machine's own Slurm client, say): in a mount namespace of
    # sshd's own (mount_namespaces(7)), each one's directory is an overlay whose upper layer holds a whiteout for
    # it (a 0/0 character device: the overlayfs documentation, "whiteouts and opaque directories"), so the file is
    # not there at all: bash's `command -v` also names a file it cannot execute.
    hidden: tuple[str, ...] = ()

    @property
    def config(self) -> Path:
        return self.root / "ssh_config"

    @property
    def log(self) -> Path:
        return self.root / "sshd.log"

    def transport(self, environ: Mapping[str, str] | None = None, persist: int = 30) -> SshTransport:
        """slurmgen's transport to this server as a laptop has it: this server's ssh config, and the connection's
        control directory under its root (short: a socket path fits in 108 bytes)."""
        env = {**(os.environ if environ is None else environ), "SLURMGEN_SSH_DIR": str(self.root / "c")}
        return SshTransport("alpha", self.alias, persist=persist, ssh=("ssh", "-F", str(self.config)), environ=env)

    def close_master(self) -> None:
        """End the shared connection to this server (its ControlMaster), as a dropped network or a logout does."""
        argv = ["ssh", "-F", str(self.config), "-o", f"ControlPath={self.root / 'c'}/%C", "-O", "exit", self.alias]
        subprocess.run(argv, capture_output=True, check=False)

    def accepted(self) -> int:
        """Logins sshd accepted so far (its log at LogLevel VERBOSE)."""
        # "Accepted publickey for root from ..." (auth.c auth_log); VERBOSE also logs "Accepted key ..." lines
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return len(re.findall(r"Accepted [\w/-]+ for ", text))  # keyboard-interactive/pam too

    def host_key(self) -> None:
        key = self.root / "host_ed25519"
        key.unlink(missing_ok=True)
        Path(f"{key}.pub").unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)

    @property
    def pam_service(self) -> str:
        """sshd names its PAM service after the program's name (OpenSSH auth-pam.h, SSHD_PAM_SERVICE is
        __progname): started through a link of this name, it reads /etc/pam.d/<this name>."""
        return f"sg-otp-{self.port}"

    def pam_lines(self) -> list[str]:
        if self.otp_secret is None:
            return ["UsePAM no", "KbdInteractiveAuthentication no"]
        users = self.root / "users.oath"
        users.write_text(f"HOTP/T30/6 {os.environ.get('USER', 'root')} - {self.otp_secret}\n")
        users.chmod(0o600)
        Path(f"/etc/pam.d/{self.pam_service}").write_text(
            f"auth required pam_oath.so usersfile={users} window=4 digits=6\n"
            "account required pam_permit.so\nsession required pam_permit.so\n"
        )
        return [
            "UsePAM yes",
            "KbdInteractiveAuthentication yes",
            "AuthenticationMethods publickey,keyboard-interactive:pam",
        ]

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # the privilege separation directory sshd demands
        # ForceCommand prints what a chatty login prints (a banner, an echo in .bashrc) before every command.
        config = [
            f"Port {self.port}",
            f"ListenAddress {self.address}",
            f"HostKey {self.root / 'host_ed25519'}",
            f"PidFile {self.root / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
            "StrictModes no",
            *self.pam_lines(),
            "PermitRootLogin yes",
            "PasswordAuthentication no",
            "LogLevel VERBOSE",
            "MaxStartups 100",
            *([] if self.plain else [
                f'ForceCommand echo "{self.noise}"; echo "{self.noise}" >&2; '
                + (f'export PATH="{self.path_prepend}:$PATH"; ' if self.path_prepend else "")
                + "".join(f"export {k}={shlex.quote(v)}; " for k, v in self.exports.items())
                + 'eval "$SSH_ORIGINAL_COMMAND"'
            ]),
            *self.extra,
        ]  # fmt: skip
        (self.root / "sshd_config").write_text("\n".join(config) + "\n")
        log = open(self.log, "ab")  # noqa: SIM115 - closed by the process's end
        program = SSHD
        if self.otp_secret is not None:
            program = str(self.root / self.pam_service)
            if not Path(program).exists():
                os.symlink(SSHD, program)
        # nsenter --net only (not `ip netns exec`, which remounts /sys): the files stay this machine's.
        enter = [] if self.netns is None else ["nsenter", f"--net=/run/netns/{self.netns}", "--"]
        argv = [*enter, program, "-D", "-e", "-f", str(self.root / "sshd_config")]
        if self.hidden:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", self.hide_script() + 'exec "$@"',
                    "sh", *argv]  # fmt: skip
        self.proc = subprocess.Popen(argv, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex((self.address, self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen: {self.log.read_text()[-500:]}")

    def hide_script(self) -> str:
        lines = []
        for i, folder in enumerate(sorted({os.path.dirname(f) for f in self.hidden})):
            upper, work = self.root / f"hide{i}" / "upper", self.root / f"hide{i}" / "work"
            upper.mkdir(parents=True)
            work.mkdir()
            lines += [f"mknod {shlex.quote(str(upper / os.path.basename(f)))} c 0 0 || exit 1"
                      for f in self.hidden if os.path.dirname(f) == folder]  # fmt: skip
            options = shlex.quote(f"lowerdir={folder},upperdir={upper},workdir={work}")
            lines.append(f"mount -t overlay overlay -o {options} {shlex.quote(folder)} || exit 1")
        return "; ".join(lines) + "; "

    def stop(self) -> None:
        """Stop the listener (sshd's per-connection children, the master's among them, live on)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def sessions(self) -> int:
        """Commands run so far (sshd's "Starting session: ..." lines at LogLevel VERBOSE, session.c)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text.count("Starting session: ")

    def remove(self) -> None:
        self.stop()
        if self.otp_secret is not None:
            Path(f"/etc/pam.d/{self.pam_service}").unlink(missing_ok=True)
        if self.jump is not None:
            self.jump.remove()
        shutil.rmtree(self.root, ignore_errors=True)


def start_sshd(
    root: Path | None = None,
    path_prepend: str = "",
    exports: dict[str, str] | None = None,
    otp_secret: str | None = None,
    bastion: bool = False,
    netns: tuple[str, str] | None = None,
    plain: bool = False,
    hidden: tuple[str, ...] = (),
) -> Sshd:
    """A started server in ``root`` (default: a new short directory under /tmp, as ssh's control socket paths
    must fit in 108 bytes and pytest's tmp_path is longer). ``otp_secret``: a TOTP code is asked after the key
    (needs Debian's libpam-oath, installed like openssh-server). ``bastion``: a second sshd, on this machine's
    loopback, and the client's config reaches this one through it (ProxyJump). ``netns``: (namespace, address):
    this one runs in that network namespace (a test cluster node's, where its Slurm commands reach slurmctld as
    the node's slurmd does) and listens on that address; the bastion and the laptop reach it over the cluster's
    bridge."""
    ensure_sshd()
    if otp_secret is not None:
        ensure_package("libpam-oath", Path("/lib/x86_64-linux-gnu/security/pam_oath.so"))
        ensure_package("oathtool", Path("/usr/bin/oathtool"))
    root = Path(tempfile.mkdtemp(prefix="sg-sshd-", dir="/tmp")) if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    user_key = root / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(user_key)], check=True)
    jump = None
    if bastion:
        jump = Sshd(root / "bastion", free_port(), alias="bastion")
        jump.root.mkdir()
        jump.host_key()
        shutil.copy(f"{user_key}.pub", jump.root / "authorized_keys")
        jump.start()
    server = Sshd(root, free_port(), path_prepend=path_prepend, exports=dict(exports or {}), otp_secret=otp_secret,
                  plain=plain, hidden=hidden)  # fmt: skip
    if netns is not None:
        server.netns, server.address = netns
    server.jump = jump
    server.host_key()
    shutil.copy(f"{user_key}.pub", root / "authorized_keys")
    user = os.environ.get("USER", "root")
    common = (
        f"  User {user}\n  IdentityFile {user_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {root / 'known_hosts'}\n"
        "  StrictHostKeyChecking accept-new\n  ConnectTimeout 5\n"
    )
    config = f"Host {server.alias}\n  HostName {server.address}\n  Port {server.port}\n{common}"
    if jump is not None:
        config += f"  ProxyJump {jump.alias}\nHost {jump.alias}\n  HostName 127.0.0.1\n  Port {jump.port}\n{common}"
    server.config.write_text(config)
    server.start()
    return server


@dataclass
class LoginUser:
    """A user of this machine made for a test, logging in to an sshd with the test's key: its login shell, its
    home, and an ssh config that logs in as it (alias ``alias``)."""

    name: str
    home: Path
    config: Path
    alias: str

    def transport(self, server: Sshd, cluster: str = "alpha") -> SshTransport:
        env = {**os.environ, "SLURMGEN_SSH_DIR": str(server.root / "c")}
        return SshTransport(cluster, self.alias, persist=30, ssh=("ssh", "-F", str(self.config)), environ=env)

    def remove(self, server: Sshd) -> None:
        argv = ["ssh", "-F", str(self.config), "-o", f"ControlPath={server.root / 'c'}/%C", "-O", "exit", self.alias]
        subprocess.run(argv, capture_output=True, check=False)
        subprocess.run(["userdel", "-r", "-f", self.name], capture_output=True, check=False)


def add_login_user(server: Sshd, name: str, shell: str) -> LoginUser:
    """A new user with ``shell`` as its login shell (useradd, as root), and a config logging in to ``server`` as
    it. Its password field is `*`: no password, but not a locked account, which sshd refuses without PAM."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to make a test user")
    subprocess.run(["userdel", "-r", "-f", name], capture_output=True, check=False)  # a crashed run's
    subprocess.run(["useradd", "-m", "-s", shell, "-p", "*", name], check=True, capture_output=True)
    home = Path(f"/home/{name}")
    # sshd reads the authorized keys as the user (auth2-pubkeyfile.c, temporarily_use_uid): they must be readable
    server.root.chmod(0o755)
    (server.root / "authorized_keys").chmod(0o644)
    text = server.config.read_text()
    user = os.environ.get("USER", "root")
    alias = f"{server.alias}-{name}"
    first = text.split("\nHost ", 1)[0]  # the server's own entry (a bastion's follows it)
    entry = first.replace(f"Host {server.alias}\n", f"Host {alias}\n", 1).replace(f"User {user}\n", f"User {name}\n")
    config = server.root / f"ssh_config-{name}"
    config.write_text(entry)
    return LoginUser(name, home, config, alias)


def ensure_package(package: str, marker: Path) -> None:
    """apt-get install ``package`` when ``marker`` is missing (as tests/cluster/up.sh installs Slurm)."""
    if marker.exists():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(f"needs Debian's {package} (apt-get install {package}), and root to install it")
    failed = apt_install(package)
    if failed or not marker.exists():
        pytest.fail(failed or f"apt-get install {package} left no {marker}")


def askpass(root: Path, secret: str) -> dict[str, str]:
    """What makes ssh ask for the code through SSH_ASKPASS (ssh(1)): a script that answers the TOTP code and
    counts each time it was asked in ``root/prompts``."""
    script = root / "askpass.sh"
    script.write_text(f"#!/bin/sh\necho asked >> {root / 'prompts'}\nexec oathtool --totp {secret}\n")
    script.chmod(0o755)
    return {"SSH_ASKPASS": str(script), "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}


def prompts(root: Path) -> int:
    path = root / "prompts"
    return len(path.read_text().splitlines()) if path.exists() else 0
