"""The real local Slurm clusters for `slurm`-marked tests, and skips for what a machine lacks.

`slurm_cluster` (session scope, one per Slurm version) uses a healthy cluster of that version that is already
up (tests/cluster/up.sh --slurm V --check) or starts one. At the end it stops only a cluster it started
itself, and only when no other test session is using it; SLURMGEN_KEEP_CLUSTER=1 keeps it running.

Versions (tests/slurm_versions.py): `--slurm-versions=22.05,24.11,26.05` (or `all`), else
$SLURMGEN_SLURM_VERSIONS, else all three under CI and 22.05 otherwise. A test that uses `slurm_cluster` runs on
the first selected version, or on each selected version it names with `@pytest.mark.slurm_versions(...)`
(no argument: all of them); its id says which (`test_x[slurm-24.11]`). `slurm_preemption` gives a test the
preemption partitions and the user-signal switch, one preemption test per cluster at a time. With several
versions selected, each version's cluster tests run in their own pytest-xdist worker, beside one worker for every
other test (pytest_cmdline_main). A `slurm`-marked test lives in a `*_cluster.py` module (or tests/cluster/).

Where the cluster cannot run (not root, no apt-get and no packages, no ip/nsenter/unshare), `slurm` tests
are skipped with the reason. With CI set, that and a failed start are errors: CI must run them all.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ranks import Launcher
from slurm_versions import (
    DOWN,
    UP,
    ClusterInfo,
    Preemption,
    Users,
    VersionError,
    healthy,
    in_cluster_module,
    preemption_lock,
    selected_versions,
    versions_for_test,
    worker_group,
)

from slurmgen.slurm.client import SlurmClient, clean_submit_env
from slurmgen.slurm.ids import JobId, JobState
from slurmgen.slurm.showjob import JobInfo

__all__ = ["DOWN", "UP", "SlurmCluster"]  # imported by tests
POLL = 0.05  # seconds between `scontrol show job` calls in wait_for

Until = str | JobState | Iterable[str | JobState] | Callable[[JobInfo], bool]


@dataclass(frozen=True)
class SlurmCluster:
    """A running test cluster and the means to use it from a test."""

    base: Path
    conf: Path
    env: dict[str, str]  # os.environ without inherited SLURM_*/SBATCH_*/PMIX_*, with this SLURM_CONF and PATH
    nodes: list[str]
    started_here: bool  # this session started it (and will stop it, unless another session uses it)
    client: SlurmClient = field(repr=False)
    version: str = "22.05"  # the Slurm version, "22.05" / "24.11" / "26.05"
    node_addrs: dict[str, str] = field(default_factory=dict)  # node name -> its address
    info: ClusterInfo | None = field(default=None, repr=False)

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


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


@functools.cache
def cluster_unavailable(version: str = "22.05") -> str | None:
    """Why the test cluster of this Slurm version can neither be used nor started here; None when it can."""
    if healthy(version):
        return None
    if os.geteuid() != 0:
        return f"starting the Slurm test cluster needs root: run tests/cluster/up.sh --slurm {version} as root first"
    missing = [t for t in ("ip", "nsenter", "unshare", "mount", "mknod", "ss", "flock") if _which(t) is None]
    if missing:
        return f"the Slurm test cluster needs {', '.join(missing)} (util-linux, iproute2)"
    if version == "22.05":
        if not all(_which(b) for b in ("slurmctld", "slurmd", "munged", "sbatch")) and _which("apt-get") is None:
            return "Slurm/munge packages are missing and there is no apt-get to install them"
    elif _which("debootstrap") is None and _which("apt-get") is None:
        return f"Slurm {version} runs from a Debian chroot: needs debootstrap (or apt-get to install it)"
    return None


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run every slurm test: {reason}", pytrace=False)
    pytest.skip(reason)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# --- which versions --------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slurm-versions",
        default=None,
        help="Slurm versions for the `slurm` tests, comma-separated (22.05,24.11,26.05) or 'all'; "
        "default $SLURMGEN_SLURM_VERSIONS, else all under CI, else 22.05. The first is the primary version.",
    )


def pytest_configure(config: pytest.Config) -> None:
    _selected(config.getoption("--slurm-versions"))  # a bad version list is a usage error, before collection
    config.addinivalue_line(
        "markers",
        "slurm_versions(*versions): run a slurm_cluster test on these Slurm versions (none named: every selected "
        "version) instead of the primary one only",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which turns these options into its workers
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With several Slurm versions selected (CI), run the tests in pytest-xdist workers, one per version for its
    cluster tests, one for the tests that start no local job (the README's set-up, the linters, the docs build, the
    browser, the test sshd) and one for every other test (slurm_versions.worker_group): the cluster tests mostly
    wait on their own clusters, the side tests on disk, the network or a program of their own, beside the local
    tests. Some directories of local tests (slurm_versions.ELSEWHERE) run in the side worker and the second
    version's, whose own tests end early; the rest stay in one worker, one after the other. An explicit
    -n/--dist (-n 0: no workers) or `-p no:xdist` is left alone."""
    option = config.option
    if not config.pluginmanager.hasplugin("xdist") or option.collectonly or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if option.numprocesses is not None or option.dist != "no" or option.tx:
        return
    versions = _selected(option.slurm_versions)
    if len(versions) > 1:
        option.numprocesses = len(versions) + 2  # and the tests that start no local job (slurm_versions.SIDE_GROUP)
        option.dist = "loadscope"  # the scheduler is pytest_xdist_make_scheduler's
        option.slurm_version_workers = versions


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown without pytest-xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler of pytest_cmdline_main's workers: one work unit per group of `worker_group`, each sent whole
    to one worker. pytest-xdist's own `--dist loadgroup` cannot do it here: its worker appends the group to each
    test id by setting `item._nodeid` (xdist/remote.py, WorkerInteractor.pytest_collection_modifyitems, 3.8.0),
    which pytest 9.2 no longer reads (_pytest/nodes.py: `Node.nodeid` returns `str(self._id)`)."""
    selected: tuple[str, ...] = getattr(config.option, "slurm_version_workers", ())
    if not selected:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByVersion(LoadScopeScheduling):  # type: ignore[misc]  # pytest-xdist ships no type information
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid, selected)

    return ByVersion(config, log)


@functools.cache
def _selected(option: str | None) -> tuple[str, ...]:
    try:
        return selected_versions(option, os.environ)
    except VersionError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses slurm_cluster gets one run per Slurm version it is for (see the module docstring)."""
    if "slurm_version" not in metafunc.fixturenames:
        return
    selected = _selected(metafunc.config.getoption("--slurm-versions"))
    marker = metafunc.definition.get_closest_marker("slurm_versions")
    try:
        versions = versions_for_test(None if marker is None else marker.args, selected)
    except VersionError as e:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: {e}") from None
    # Session scope: tests are grouped by version, and each version's cluster is stopped (when this session
    # started it) before the next one starts.
    ids = [f"slurm-{v}" for v in versions]
    metafunc.parametrize(
        "slurm_version",
        versions
        or [
            pytest.param(
                "none", marks=pytest.mark.skip(reason=f"not for the selected Slurm versions {', '.join(selected)}")
            )
        ],
        scope="session",
        ids=ids or None,
    )


@pytest.fixture(scope="session")
def slurm_version(request: pytest.FixtureRequest) -> str:
    """The Slurm version of this test's cluster (set by pytest_generate_tests)."""
    return str(getattr(request, "param", _selected(request.config.getoption("--slurm-versions"))[0]))


@pytest.fixture(scope="session")
def slurm_cluster(slurm_version: str) -> Iterator[SlurmCluster]:
    reason = cluster_unavailable(slurm_version)
    if reason:
        _skip_or_fail(reason)
    info = ClusterInfo.query(slurm_version)
    users = Users(info.base)  # before starting: a session tearing down waits for us, or we wait for it
    started = False
    select = ["--slurm", slurm_version]
    try:
        if not healthy(slurm_version):
            # A chroot version builds its chroot on first use (1-2 minutes), hence the long timeout.
            result = subprocess.run(
                ["bash", str(UP), *select], capture_output=True, text=True, timeout=1200, check=False
            )
            if result.returncode != 0:
                _skip_or_fail(
                    f"tests/cluster/up.sh --slurm {slurm_version} failed (exit {result.returncode}):\n"
                    f"{_tail(result.stderr)}"
                )
            started = "already up" not in result.stderr
        env = info.client_env(clean_submit_env(os.environ))
        yield SlurmCluster(
            info.base,
            info.conf,
            env,
            list(info.nodes),
            started,
            SlurmClient(env=env),
            slurm_version,
            dict(info.node_addrs),
            info,
        )
    finally:
        keep = os.environ.get("SLURMGEN_KEEP_CLUSTER") == "1"
        if users.last_one_out() and started and not keep:
            subprocess.run(["bash", str(DOWN), *select], capture_output=True, timeout=120, check=False)
        users.close()


_SETTABLE_SIGNALS = sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP})


@pytest.fixture(autouse=True)
def restore_signal_state() -> Iterator[None]:
    """Give the next test the signal dispositions and mask this one found. A test that runs slurmgen's signal code
    in the test process (Preemption's handlers, the SIGTERM ignored during a requeue) must not hand them on: to the
    tests after it, nor to the processes those start, which inherit ignored and blocked signals (signal(7),
    execve(2)); a supervised program started with SIGTERM ignored never ends on the step's SIGTERM."""
    before = {sig: signal.getsignal(sig) for sig in _SETTABLE_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for sig, handler in before.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            with contextlib.suppress(OSError, ValueError):  # one the C library keeps for itself
                signal.signal(sig, handler)


@pytest.fixture(autouse=True)
def cancel_jobs_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a cluster test, cancel what it submitted (jobs working in its tmp_path) and left in the queue: a test
    that failed mid-way must not keep nodes busy for the tests after it on the same cluster."""
    if "slurm_cluster" not in request.fixturenames or "tmp_path" not in request.fixturenames:
        yield
        return
    cluster: SlurmCluster = request.getfixturevalue("slurm_cluster")
    where: Path = request.getfixturevalue("tmp_path")
    yield
    try:  # a cluster this test took down answers nothing: there is nothing to cancel then
        # A job is the test's when it works in tmp_path or its batch script is there (%o: a spec without chdir
        # works where pytest runs, but the tests write the script they submit into tmp_path).
        queue = cluster.run(["squeue", "-h", "-o", "%i|%Z|%o"], timeout=30)
        left = [job for job, *paths in (line.split("|") for line in queue.stdout.splitlines())
                if any(path and Path(path).is_relative_to(where) for path in paths)]  # fmt: skip
        if left:
            cluster.run(["scancel", *left], timeout=30)
    except subprocess.TimeoutExpired:
        pass


@pytest.fixture
def slurm_preemption(slurm_cluster: SlurmCluster) -> Iterator[Preemption]:
    """The cluster's preemption partitions and its user-signal switch (off at the start and at the end).

    Holds the cluster's preemption lock for the test, so preemption tests of several sessions take turns.
    """
    info = slurm_cluster.info
    assert info is not None
    with preemption_lock(info.base):
        shown = slurm_cluster.run(["scontrol", "show", "partition", "-o", "high"])
        if shown.returncode != 0:
            _skip_or_fail(
                f"the Slurm {slurm_cluster.version} cluster in {info.base} has no preemption partitions: an older "
                "tests/cluster/up.sh started it; restart it (down.sh, then up.sh) when no session uses it"
            )
        preemption = Preemption(info)
        preemption.user_signal(False)
        try:
            yield preemption
        finally:
            preemption.user_signal(False)


# --- markers -----------------------------------------------------------------------------------------------


def _has_gpu() -> bool:
    return Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on the real cluster or in network namespaces are slow by nature: the fast lane (-m "not slow")
    leaves them out without each one saying so. A cluster test outside a cluster module is refused: its worker
    would be the local one (slurm_versions.worker_group)."""
    misplaced = []
    for item in items:
        if item.get_closest_marker("slurm") or item.get_closest_marker("netns"):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slurm") and not in_cluster_module(item.nodeid.partition("::")[0]):
            misplaced.append(item.nodeid)
    if misplaced:  # worker_group tells a cluster test by its file's name
        raise pytest.UsageError(f"slurm-marked tests must live in a *_cluster.py module: {', '.join(misplaced)}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or, with CI set, fail) tests whose marker names something this machine does not have."""
    markers = {m.name for m in item.iter_markers()}
    callspec = getattr(item, "callspec", None)
    version = callspec.params.get("slurm_version", "22.05") if callspec else "22.05"
    if "slurm" in markers and version != "none" and (reason := cluster_unavailable(version)):
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
    """slurmgen keeps no cache, but what the tests start does: torch and the frameworks (torch.hub, Hugging Face's
    hub, Lightning) cache under XDG_CACHE_HOME. The session gets its own, so tests neither read a developer's
    cache nor leave entries in it (subprocesses inherit it)."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    """The test's rank launches (tests/ranks.py), under tmp_path/launch<N>; whatever still runs at the end is killed."""
    launches = Launcher(tmp_path)
    yield launches
    launches.kill()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """tmp_path/state, a real 1 MiB tmpfs of its own (the launches' state directory: test_preemption.py), for full
    disks and read-only remounts; unmounted at teardown. Mounting needs root (CI is): skipped without it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(state)], check=True)
    try:
        yield state
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)
