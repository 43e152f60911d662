"""The real local Slurm cluster for `slurm`-marked tests, and skips for what a machine lacks.

`slurm_cluster` (session scope) uses a healthy cluster that is already up (tests/cluster/up.sh --check) or
starts one with tests/cluster/up.sh. At the end of the session it stops only a cluster it started itself,
and only when no other test session is using it; SLURMGEN_KEEP_CLUSTER=1 keeps it running.

Where the cluster cannot run (not root, no apt-get and no packages, no ip/nsenter/unshare), `slurm` tests
are skipped with the reason. With CI set, that and a failed start are errors: CI must run them all.
"""

from __future__ import annotations

import fcntl
import functools
import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from slurmgen.slurm.client import SlurmClient, clean_submit_env
from slurmgen.slurm.ids import JobId, JobState
from slurmgen.slurm.showjob import JobInfo

CLUSTER_DIR = Path(__file__).parent / "cluster"
UP, DOWN = CLUSTER_DIR / "up.sh", CLUSTER_DIR / "down.sh"
BASE = Path(os.environ.get("SLURMGEN_CLUSTER_BASE", "/tmp/slurmgen-cluster"))
NODES = ["node1", "node2", "node3"]
POLL = 0.05  # seconds between `scontrol show job` calls in wait_for

Until = str | JobState | Iterable[str | JobState] | Callable[[JobInfo], bool]


@dataclass(frozen=True)
class SlurmCluster:
    """A running test cluster and the means to use it from a test."""

    base: Path
    conf: Path
    env: dict[str, str]  # os.environ without inherited SLURM_*/SBATCH_*/PMIX_*, with this SLURM_CONF
    nodes: list[str]
    started_here: bool  # this session started it (and will stop it, unless another session uses it)
    client: SlurmClient = field(repr=False)

    def run(self, args: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (sbatch, squeue, srun...) against this cluster; text, captured."""
        kw.setdefault("env", self.env)
        kw.setdefault("timeout", 60)
        kw.setdefault("check", False)
        return subprocess.run(list(args), capture_output=True, text=True, **kw)

    def submit(self, script: Path, *sbatch_args: str) -> JobId:
        """sbatch --parsable SCRIPT: the job id."""
        return self.client.sbatch(script, sbatch_args).job_id

    def job_info(self, job_id: JobId | str | int) -> dict[str, str]:
        """Every field of `scontrol show job` for the job; {} when Slurm does not know it."""
        info = self.client.show_job(job_id)
        return {} if info is None else dict(info.fields)

    def wait_for(self, job_id: JobId | str | int, until: Until, timeout: float = 30.0) -> JobInfo:
        """Poll `scontrol show job` every 50 ms until ``until`` holds; the job's record at that moment.

        ``until`` is a state (Slurm's word such as "COMPLETED", or a JobState), several of them, or a
        predicate on the JobInfo. Fails the test with the last record seen when ``timeout`` passes.
        """
        match = _matcher(until)
        deadline = time.monotonic() + timeout
        while True:
            info = self.client.show_job(job_id)
            if info is not None and match(info):
                return info
            if time.monotonic() > deadline:
                seen = "unknown to Slurm" if info is None else f"{info.state_name} (reason {info.reason})"
                pytest.fail(f"job {job_id}: not {until!r} within {timeout:g} s; last seen {seen}")
            time.sleep(POLL)


def _matcher(until: Until) -> Callable[[JobInfo], bool]:
    if callable(until):
        return until
    wanted = [until] if isinstance(until, str | JobState) else list(until)
    names = {w.upper() for w in wanted if isinstance(w, str)}
    states = {w for w in wanted if isinstance(w, JobState)}
    return lambda info: info.state in states or info.state_name in names or info.state.name in names


# --- can the cluster run here? -----------------------------------------------------------------------------


def _healthy() -> bool:
    try:
        return subprocess.run(["bash", str(UP), "--check"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


@functools.cache
def cluster_unavailable() -> str | None:
    """Why the test cluster can neither be used nor started here; None when it can."""
    if _healthy():
        return None
    if os.geteuid() != 0:
        return "starting the Slurm test cluster needs root: run tests/cluster/up.sh as root first"
    missing = [t for t in ("ip", "nsenter", "unshare", "mount", "mknod", "ss", "flock") if _which(t) is None]
    if missing:
        return f"the Slurm test cluster needs {', '.join(missing)} (util-linux, iproute2)"
    if not all(_which(b) for b in ("slurmctld", "slurmd", "munged", "sbatch")) and _which("apt-get") is None:
        return "Slurm/munge packages are missing and there is no apt-get to install them"
    return None


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run every slurm test: {reason}", pytrace=False)
    pytest.skip(reason)


class _Users:
    """Every session using the cluster holds a shared lock; the one that started it stops it only when it
    can take the lock exclusively, i.e. when no other session (another worktree, say) still uses it."""

    def __init__(self, base: Path) -> None:
        self._fd = os.open(f"{base}.users", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def last_one_out(self) -> bool:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        os.close(self._fd)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    reason = cluster_unavailable()
    if reason:
        _skip_or_fail(reason)
    users = _Users(BASE)  # before starting: a session tearing down waits for us, or we wait for it
    started = False
    try:
        if not _healthy():
            result = subprocess.run(["bash", str(UP)], capture_output=True, text=True, timeout=900, check=False)
            if result.returncode != 0:
                _skip_or_fail(f"tests/cluster/up.sh failed (exit {result.returncode}):\n{_tail(result.stderr)}")
            started = "already up" not in result.stderr
        conf = BASE / "etc" / "slurm.conf"
        env = clean_submit_env(os.environ) | {"SLURM_CONF": str(conf)}
        yield SlurmCluster(BASE, conf, env, list(NODES), started, SlurmClient(env=env))
    finally:
        keep = os.environ.get("SLURMGEN_KEEP_CLUSTER") == "1"
        if users.last_one_out() and started and not keep:
            subprocess.run(["bash", str(DOWN)], capture_output=True, timeout=120, check=False)
        users.close()


# --- markers -----------------------------------------------------------------------------------------------


def _has_gpu() -> bool:
    return Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on the real cluster or in network namespaces are slow by nature: the fast lane (-m "not slow")
    leaves them out without each one saying so."""
    for item in items:
        if item.get_closest_marker("slurm") or item.get_closest_marker("netns"):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or, with CI set, fail) tests whose marker names something this machine does not have."""
    markers = {m.name for m in item.iter_markers()}
    if "slurm" in markers and (reason := cluster_unavailable()):
        _skip_or_fail(reason)
    if "torch" in markers and importlib.util.find_spec("torch") is None:
        _skip_or_fail_torch()
    if "netns" in markers and (os.geteuid() != 0 or _which("ip") is None):
        _skip_or_fail("needs root and iproute2 (ip netns)")
    if "gpu" in markers and not _has_gpu():
        pytest.skip("needs a CUDA GPU")  # never on CI (DESIGN: CI has everything but GPUs)


def _skip_or_fail_torch() -> None:
    _skip_or_fail("needs torch: pip install torch==2.13.0 (the CPU build is enough)")


@pytest.fixture
def torch_module() -> Any:
    """The torch module, or a skip (a CI failure) when torch is not installed."""
    if importlib.util.find_spec("torch") is None:
        _skip_or_fail_torch()
    import torch  # only for the tests that ask for it: importing it takes seconds

    return torch


@pytest.fixture(scope="session", autouse=True)
def _private_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """slurmgen's render and template caches live under XDG_CACHE_HOME: give the test session its own, so tests
    neither read a developer's cache nor leave entries in it (subprocesses inherit it)."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous
