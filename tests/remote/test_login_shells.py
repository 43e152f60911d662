"""Every remote command runs under bash whatever the user's login shell: tcsh, fish and dash users on a real sshd
that runs each command through the user's own login shell (no ForceCommand), the error of a login that cannot run
it shown in the line, and Slurm's commands found when only a login profile (`~/.bash_profile`) puts them on PATH,
and said in one line when even that does not."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from recorded import PRIMARY, recorded_text
from ssh_server import LoginUser, Sshd, add_login_user, ensure_package, start_sshd

from slurmgen.backends.slurm_ssh.remote_status import remote_states
from slurmgen.errors import SchedulerMissing
from slurmgen.remote.transport import TransportError, frame


@pytest.fixture
def plain_sshd() -> Iterator[Sshd]:
    server = start_sshd(plain=True)
    yield server
    server.remove()


@pytest.fixture
def slurmless_sshd() -> Iterator[Sshd]:
    """A plain sshd whose sessions do not see this machine's own Slurm client (the test cluster's)."""
    found = (shutil.which(c) for c in ("sbatch", "scontrol", "squeue", "sacct", "scancel"))
    server = start_sshd(plain=True, hidden=tuple(os.path.realpath(p) for p in found if p))
    yield server
    server.remove()


def user_with(server: Sshd, name: str, shell: str, package: str | None = None) -> LoginUser:
    if package is not None:
        ensure_package(package, Path(shell))
    return add_login_user(server, name, shell)


@pytest.mark.parametrize(("shell", "package"), [("/usr/bin/tcsh", "tcsh"), ("/usr/bin/fish", "fish"),
                                                 ("/usr/bin/dash", "dash")])  # fmt: skip
def test_a_command_runs_under_bash_whatever_the_login_shell(plain_sshd: Sshd, shell: str, package: str) -> None:
    user = user_with(plain_sshd, f"sg-{package}", shell, package)
    try:
        t = user.transport(plain_sshd)
        # bash's own words: arithmetic, an array, a quote, a '!' and a multi-line body, then the caller's stdin
        script = "a=(x y); echo \"${#a[@]} $((2 + 3)) it's\"\nprintf '%s\\n' 'a!b' \"$BASH_VERSION\" | head -2\ncat"
        done = t.run(script, stdin=b"data\n")
        lines = done.stdout.decode().splitlines()
        assert (done.returncode, lines[:2], lines[-1]) == (0, ["2 5 it's", "a!b"], "data"), done
        assert t.run("exit 7").returncode == 7
        who = t.run('getent passwd "$(id -un)" | cut -d: -f7').stdout.decode().strip()
        assert who == shell  # it was this user's login shell that sshd ran
        if package == "tcsh":  # what the transport's old form (a multi-line single-quoted word) met there
            old = subprocess.run([*t.ssh, "-o", "BatchMode=yes", user.alias, "bash -c " + repr(frame("true", "n"))],
                                 capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
            assert "Unmatched" in old.stderr, old.stderr
    finally:
        user.remove(plain_sshd)


def test_a_login_that_cannot_run_the_command_says_why(plain_sshd: Sshd) -> None:
    user = user_with(plain_sshd, "sg-nologin", "/usr/sbin/nologin")
    try:
        with pytest.raises(TransportError) as caught:
            user.transport(plain_sshd).run("true")
        line = str(caught.value)
        assert "\n" not in line and line.startswith("cluster alpha: the command ended early")
        assert "This account is currently not available." in line, line
    finally:
        user.remove(plain_sshd)


def stand_in_slurm(home: Path, name: str) -> None:
    """scontrol answering from recorded 22.05 output, in ~/slurm-bin (owned by the user, as a module's would be)."""
    bin_dir = home / "slurm-bin"
    bin_dir.mkdir()
    config, partitions = home / "config.out", home / "partitions.out"
    # KillWait 77: the stand-in's answer, not a real Slurm's
    config.write_text(
        recorded_text("show-config.out", PRIMARY).replace(
            "KillWait                = 5 sec", "KillWait                = 77 sec"
        )
    )
    partitions.write_text(recorded_text("show-partition-o.out", PRIMARY))
    body = f'case "$*" in\n"show config") cat {config};;\n"-o show partition") cat {partitions};;\n*) exit 1;;\nesac\n'
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\n{body}")
    (bin_dir / "scontrol").chmod(0o755)
    shutil.chown(bin_dir, name)


def test_slurm_only_on_the_login_profile_path_is_found_and_its_absence_is_said(
    slurmless_sshd: Sshd, tmp_path: Path
) -> None:
    plain_sshd = slurmless_sshd
    profiled = user_with(plain_sshd, "sg-module", "/bin/bash")
    bare = user_with(plain_sshd, "sg-noslurm", "/bin/bash")
    try:
        stand_in_slurm(profiled.home, profiled.name)
        # as `module load slurm` would: only a login shell reads it (bash(1) INVOCATION)
        (profiled.home / ".bash_profile").write_text(f'export PATH="{profiled.home}/slurm-bin:$PATH"\n')
        assert b"scontrol" not in subprocess.run(
            [*profiled.transport(plain_sshd).ssh, profiled.alias, "command -v scontrol || echo none"],
            capture_output=True, timeout=30, check=False,
        ).stdout  # fmt: skip
        config = tmp_path / "cfg" / "slurmgen"
        config.mkdir(parents=True)
        (config / "clusters.yaml").write_text(
            "".join(f"{u.name}:\n  host: {u.alias}\n  workdir: {u.home}/work\n" for u in (profiled, bare))
        )
        for user in (profiled, bare):
            env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "SLURMGEN_SSH_CONFIG": str(user.config),
                   "SLURMGEN_SSH_DIR": str(plain_sshd.root / "c"),
                   "SLURMGEN_HOME": str(tmp_path / "journal")}  # fmt: skip
            done = run_slurmgen("doctor", "--cluster", user.name, cwd=tmp_path, env=env)
            if user is profiled:
                assert done.returncode == 0, done.stderr
                assert done.stdout.startswith("Slurm 22.05") and "KillWait     77 s" in done.stdout, done.stdout
            else:
                assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
                assert f"cluster {bare.name}: scontrol is not found on the login node" in done.stderr
                assert "module load slurm" in done.stderr and "UNKNOWN" not in done.stderr
                with pytest.raises(SchedulerMissing) as caught:  # status: the same line, not a job UNKNOWN
                    remote_states(user.transport(plain_sshd, bare.name), ["41"], {})
                assert str(caught.value).startswith(f"cluster {bare.name}: squeue is not found on the login node")
    finally:
        profiled.remove(plain_sshd)
        bare.remove(plain_sshd)
