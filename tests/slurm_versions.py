"""Which Slurm versions the `slurm` tests run on, each version's test cluster, and its preemption partitions.

Pure helpers for tests/conftest.py (which holds the fixtures): no slurmgen import, so the harness does not
depend on how the package is laid out.

Versions: ``--slurm-versions=22.05,24.11,26.05`` (or ``all``), else ``$SLURMGEN_SLURM_VERSIONS``, else all of
them when ``$CI`` is set and 22.05 alone otherwise. The first one listed is the *primary* version: a test that
uses the ``slurm_cluster`` fixture runs on the primary version only, unless it is marked
``@pytest.mark.slurm_versions()`` (every selected version), ``@pytest.mark.slurm_versions("24.11", ...)``
(those of them that are selected) or ``@pytest.mark.slurm_versions(ANY)`` (once, on the last selected version:
for a long test of what does not differ between versions, which would otherwise lengthen the primary version's
worker, the longest; with one version selected that is the primary one).
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CLUSTER_DIR = Path(__file__).parent / "cluster"
UP, DOWN = CLUSTER_DIR / "up.sh", CLUSTER_DIR / "down.sh"
PREEMPT_SIGNAL = CLUSTER_DIR / "preempt-signal.sh"

SUPPORTED = ("22.05", "24.11", "26.05")
LOCAL_DEFAULT = ("22.05",)  # without CI: the host's own Slurm, which needs no chroot build


class VersionError(ValueError):
    """A version list names a version the harness cannot start."""


def selected_versions(option: str | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The versions to test, in order, from the command-line option or the environment."""
    text = option or environ.get("SLURMGEN_SLURM_VERSIONS", "")
    if not text:
        return SUPPORTED if environ.get("CI") else LOCAL_DEFAULT
    if text.strip() == "all":
        return SUPPORTED
    versions = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    unknown = [v for v in versions if v not in SUPPORTED]
    if unknown or not versions:
        raise VersionError(f"unsupported Slurm version(s) {', '.join(unknown) or text!r}: choose from {SUPPORTED}")
    return versions


ANY = "any"  # @pytest.mark.slurm_versions(ANY): once, on the last selected version


def versions_for_test(marker_args: Sequence[str] | None, selected: Sequence[str]) -> list[str]:
    """The versions one test runs on: ``marker_args`` is None without a slurm_versions marker, () with a bare one."""
    if marker_args is None:
        return [selected[0]]
    if not marker_args:
        return list(selected)
    if tuple(marker_args) == (ANY,):
        return [selected[-1]]
    unknown = [v for v in marker_args if v not in SUPPORTED]
    if unknown:
        raise VersionError(f"slurm_versions marker names unsupported version(s) {unknown}")
    return [v for v in selected if v in marker_args]


LOCAL_GROUP = "local"
# Tests that start no local job (no local job id, no port of the job's) and mostly wait on disk, the network or a
# program of their own: the README's set-up tests (a fresh venv, the CUDA build resolved against the package
# index), the linters and the type checker, the strict docs build, the headless browser, the test sshd. They get a
# worker of their own beside the local one, which would otherwise wait on them (tests/conftest.py), and local
# tests of ELSEWHERE fill it once they are done.
SIDE_GROUP = "side"
SIDE_TESTS = (
    "tests/test_readme.py::test_the_set_up_block_works_on_a_fresh_debian_python",
    "tests/test_readme.py::test_the_gpu_line_beside_the_set_up_block_resolves_the_cuda_build",
    "tests/test_readme.py::test_the_set_up_blocks_cpu_line_resolves_no_cuda_package",
)
SIDE_MODULES = (
    "tests/test_style.py",
    "tests/test_docs.py",
    "tests/goodput/test_goodput_html.py",
    "tests/remote/test_transport.py",
    "tests/remote/test_snapshot.py",
    "tests/test_apt_install.py",
)


# Local tests (real processes on this machine, no cluster) that run beside the cluster tests of a worker whose own
# cluster work ends early, rather than after every other local test: measured under CI on 2 cores, the 24.11
# worker's cluster tests took 6 minutes and the side worker's 11, while the local worker ran for an hour alone.
# Whole directories, so a module's tests stay together; the tests take their own ports, job ids and directories,
# as they must beside another test session anyway. A directory -> "side", or "second" for the worker of the
# second selected version (with one version selected there are no workers, and they are local tests as before).
ELSEWHERE = (
    ("tests/runtime/", "second"),
    ("tests/integrations/", "second"),
    ("tests/security/", SIDE_GROUP),
    ("tests/remote/", SIDE_GROUP),
    ("tests/task/", SIDE_GROUP),
    ("tests/api/", SIDE_GROUP),
    ("tests/scenarios/", SIDE_GROUP),  # the scenario engine's seed corpus: about 10 minutes of local jobs
)


def in_cluster_module(path: str) -> bool:
    """Whether a test file holds cluster tests by its name: `*_cluster.py`, or anything under tests/cluster/. Every
    `slurm`-marked test must live in one (checked at collection, tests/conftest.py), so that a test's worker can be
    told from its id alone: pytest-xdist's scheduler sees ids, not markers."""
    return path.endswith("_cluster.py") or "tests/cluster/" in f"/{path}"


def worker_group(nodeid: str, selected: Sequence[str]) -> str:
    """The pytest-xdist worker group of a test, from its id: each version's cluster tests (parameter id
    ``slurm-24.11``, alone or joined to others by ``-``; for the first version, any test of a cluster module) run in
    that version's own worker, every other test in the local one (tests/conftest.py, pytest_cmdline_main), except
    the directories of ELSEWHERE, which fill the workers whose own tests end early. The cluster workers mostly wait
    on their clusters."""
    params = nodeid.partition("[")[2]
    for version in selected[1:]:
        if re.search(rf"(^|-)slurm-{re.escape(version)}(-|\]$)", params):
            return f"slurm-{version}"
    if selected and in_cluster_module(nodeid.partition("::")[0]):
        return f"slurm-{selected[0]}"
    if nodeid.partition("[")[0] in SIDE_TESTS or nodeid.partition("::")[0] in SIDE_MODULES:
        return SIDE_GROUP
    for prefix, group in ELSEWHERE:
        if nodeid.startswith(prefix):
            if group != "second":
                return group
            if len(selected) > 1:
                return f"slurm-{selected[1]}"
    return LOCAL_GROUP


@dataclass(frozen=True)
class ClusterInfo:
    """What `tests/cluster/up.sh --slurm VERSION --info` says about that version's test cluster."""

    version: str
    base: Path
    conf: Path
    path_prepend: str  # the chroot versions' client wrappers: put first on PATH; "" for the host's Slurm
    nodes: tuple[str, ...]
    node_addrs: Mapping[str, str]
    namespaces: Mapping[str, str]  # node name -> its network namespace (`ip netns`), where its slurmd runs
    grace_time: int  # GraceTime of the *-grace partitions, seconds
    kill_wait: int
    user_signal_parameter: str  # the slurm.conf line that turns the user signal at preemption on

    @classmethod
    def query(cls, version: str, instance: int | None = None) -> ClusterInfo:
        """``instance``: a separate cluster of that version (up.sh --instance K); None: the one up.sh picks
        ($SLURMGEN_CLUSTER_INSTANCE, else the shared instance 0)."""
        select = ["--slurm", version, *([] if instance is None else ["--instance", str(instance)])]
        out = subprocess.run(
            ["bash", str(UP), *select, "--info"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        info = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        nodes = tuple(info["NODES"].split())
        return cls(
            version=version,
            base=Path(info["BASE"]),
            conf=Path(info["SLURM_CONF"]),
            path_prepend=info["PATH_PREPEND"],
            nodes=nodes,
            node_addrs=dict(zip(nodes, info["NODE_ADDRS"].split(), strict=True)),
            namespaces=dict(zip(nodes, info["NAMESPACES"].split(), strict=True)),
            grace_time=int(info["GRACE_TIME"]),
            kill_wait=int(info["KILL_WAIT"]),
            user_signal_parameter=info["USER_SIGNAL_PARAMETER"],
        )

    def client_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """``environ`` with this cluster's SLURM_CONF and its client commands first on PATH (the chroot's
        wrappers, or the host's /usr/bin), and no other test cluster's wrappers on it: a client of another
        version is refused by slurmctld (tests/cluster/common.sh client_path)."""
        env = dict(environ) | {"SLURM_CONF": str(self.conf)}
        inherited = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if not _wrapper_dir(p)]
        own = [self.path_prepend] if self.path_prepend else ["/usr/bin", "/usr/sbin"]
        env["PATH"] = os.pathsep.join(own + inherited)
        return env


def _wrapper_dir(entry: str) -> bool:
    """A test cluster's $BASE/bin (its base carries up.sh's marker file)."""
    return bool(entry) and Path(entry).name == "bin" and (Path(entry).parent / ".slurmgen-cluster").exists()


def healthy(version: str) -> bool:
    try:
        check = subprocess.run(["bash", str(UP), "--slurm", version, "--check"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return check.returncode == 0


class Users:
    """Every session using a cluster holds a shared lock; the one that started it stops it only when it can take
    the lock exclusively, i.e. when no other session (another worktree, say) still uses it."""

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


@dataclass(frozen=True)
class Preemption:
    """The preemption partitions of a test cluster (tests/cluster/README.md, "Preemption").

    All are over the same three nodes. A job in ``high`` (PriorityTier 2) preempts the jobs of the four low-*
    partitions (tier 1) that hold the resources it needs; ``debug``, the default partition, is never preempted
    and preempts nothing. Submit the preemptor with the victim's nodes (``-w``) so that it preempts only the
    job under test.
    """

    info: ClusterInfo
    high: str = "high"
    requeue: str = "low-requeue"  # PreemptMode=REQUEUE GraceTime=0
    requeue_grace: str = "low-requeue-grace"  # PreemptMode=REQUEUE GraceTime=grace_time
    cancel: str = "low-cancel"  # PreemptMode=CANCEL GraceTime=0
    cancel_grace: str = "low-cancel-grace"  # PreemptMode=CANCEL GraceTime=grace_time

    @property
    def grace_time(self) -> int:
        return self.info.grace_time

    def partition(self, mode: str, grace: bool) -> str:
        """The low partition for PreemptMode ``mode`` ("REQUEUE" or "CANCEL"), with or without a grace time."""
        name = {"REQUEUE": self.requeue, "CANCEL": self.cancel}[mode.upper()]
        return f"{name}-grace" if grace else name

    def user_signal(self, on: bool) -> None:
        """Switch the cluster-wide user signal at preemption (scontrol reconfigure; a few seconds)."""
        subprocess.run(
            ["bash", str(PREEMPT_SIGNAL), "--slurm", self.info.version, "on" if on else "off"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )


@contextmanager
def preemption_lock(base: Path, timeout: float = 900.0) -> Iterator[None]:
    """Hold the cluster's preemption lock: one preemption test at a time per cluster, across test sessions (a
    job in ``high`` preempts any low-* job on its nodes, and the user-signal switch is cluster-wide)."""
    fd = os.open(f"{base}.preempt.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another session held {base}.preempt.lock for {timeout:g} s") from None
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)
