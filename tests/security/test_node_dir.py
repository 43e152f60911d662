"""The node's own directory (/dev/shm/slurmgen-<uid>-<crc>-<node>, progress_mark.node_dir) when another user of the
node made it first: its name is computable by anyone. The planter is uid 65534; the victim's code runs as uid 1 (a
non-root user: root would pass an owner check the kernel makes for it), in a forked child."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from security.other_users import PLANTER, VICTIM, as_victim, need_root, plant
from slurmgen import contract
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import ProgressMark, node_dir


@pytest.fixture
def job_env() -> Iterator[dict[str, str]]:
    need_root()
    top = Path(tempfile.mkdtemp(prefix="slurmgen-nodedir-"))
    top.chmod(0o755)
    log = top / "logs"
    log.mkdir()
    os.chown(log, VICTIM, VICTIM)
    env = {contract.LOG_DIR: str(log), contract.HANG_TIMEOUT: "20", "SLURMD_NODENAME": "n1", "SLURM_LOCALID": "0",
           "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}  # fmt: skip
    folder = victims_node_dir(env)
    try:
        yield env
    finally:
        shutil.rmtree(top)
        shutil.rmtree(folder, ignore_errors=True)


def victims_node_dir(env: dict[str, str]) -> str:
    """The victim's node directory, as its own processes name it (the uid is in the name)."""
    head, name = os.path.split(node_dir(JobContext.from_environ(env)))
    return os.path.join(head, name.replace(f"slurmgen-{os.getuid()}-", f"slurmgen-{VICTIM}-", 1))


def start_watch(env: dict[str, str]) -> Callable[[], str]:
    from slurmgen.task import node_watch, watchdog  # noqa: F401 - imported here: the victim cannot read the library

    def act() -> str:
        said: list[str] = []
        stop = watchdog.start(JobContext.from_environ(env), 0, os.getpid(), said.append)
        if stop is not None:
            stop.set()
        mark = ProgressMark(JobContext.from_environ(env), 0)
        return "\n".join([f"watching={stop is not None}", f"marks={mark.node_path is not None}", *said])

    return act


def test_a_node_directory_another_user_made_first_is_refused_and_none_of_its_files_acted_on(
    job_env: dict[str, str],
) -> None:
    folder = victims_node_dir(job_env)
    plant(f"mkdir -m 777 {folder} && touch {folder}/hang {folder}/release {folder}/rank-0")
    said = as_victim(start_watch(job_env)).splitlines()
    assert said[:2] == ["watching=False", "marks=False"], said
    assert len(said) == 3, said  # one line
    line = said[2]
    assert folder in line and f"owned by uid {PLANTER}" in line and "mode 777" in line and "remove it" in line, line
    assert "watchdog is off" in line


def test_a_link_planted_as_the_node_directory_is_refused(job_env: dict[str, str]) -> None:
    folder = victims_node_dir(job_env)
    target = tempfile.mkdtemp(prefix="slurmgen-elsewhere-")
    os.chown(target, VICTIM, VICTIM)
    try:
        plant(f"ln -s {target} {folder}")
        said = as_victim(start_watch(job_env)).splitlines()
        assert said[0] == "watching=False" and "is a symbolic link" in said[2], said
    finally:
        os.unlink(folder)
        shutil.rmtree(target)


def test_the_users_own_node_directory_is_made_private_and_watched(job_env: dict[str, str]) -> None:
    folder = victims_node_dir(job_env)
    said = as_victim(start_watch(job_env)).splitlines()
    assert said == ["watching=True", "marks=True"], said
    info = os.lstat(folder)
    assert (info.st_uid, info.st_mode & 0o777) == (VICTIM, 0o700)


def test_the_end_of_the_step_never_removes_another_users_node_directory(job_env: dict[str, str]) -> None:
    from slurmgen.task import watchdog

    folder = victims_node_dir(job_env)
    plant(f"mkdir -m 777 {folder} && touch {folder}/hang")

    def leave() -> str:
        watchdog.leave_node(JobContext.from_environ(job_env), 0, 0.0)
        return "left"

    assert as_victim(leave) == "left"
    assert sorted(os.listdir(folder)) == ["hang"] and os.stat(folder).st_uid == PLANTER


def test_a_local_job_whose_node_directory_another_user_keeps_touching_runs_to_its_end(tmp_path: Path) -> None:
    """The whole attack on a real local run (`slurmgen run`): the other user made the node directory first and
    touches `hang`, the ranks' `dumped-N` and `release` in it every 0.1 s, which before made the watchdog of the
    node's second task end its healthy program as hung within about a second, at every restart, until the
    repeated-failure rule ended the job. The victim is the test's user (root): the refusal is slurmgen's
    own owner check, which root does not pass either."""
    import subprocess
    import sys

    from cli_run import run_slurmgen

    need_root()
    tmp_path.chmod(0o755)
    # the local id is the first free one here (a port or a state another run holds is skipped): plant for each
    folders = [node_dir(JobContext.from_environ({contract.LOG_DIR: str(tmp_path / "logs" / f"job-{n}"),
                                                 "SLURMD_NODENAME": "127.0.0.1"})) for n in range(1, 10)]  # fmt: skip
    listed = " ".join(folders)
    toucher = subprocess.Popen(
        ["setpriv", "--reuid", str(PLANTER), "--regid", str(PLANTER), "--clear-groups", "sh", "-c",
         f"for d in {listed}; do mkdir -m 777 $d; done; while :; do for d in {listed}; do "
         "touch $d/hang $d/dumped-0 $d/dumped-1 $d/release; done; sleep 0.1; done"],
    )  # fmt: skip
    try:
        (tmp_path / "job.yaml").write_text(
            f"name: job\ncommand: [{sys.executable!r}, '-c', 'import time; time.sleep(4)']\ntime: '00:10:00'\n"
            f"nodes: 1\ntasks_per_node: 2\npython: {sys.executable}\nrecovery: {{hang_timeout: 1}}\n"
        )
        done = run_slurmgen("run", "job.yaml", cwd=tmp_path)
    finally:
        toucher.kill()
        toucher.wait()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    everything = done.stderr + "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").rglob("*.log"))
    assert done.returncode == 0, everything
    assert "no progress on any rank" not in everything and "restart" not in everything.lower(), everything
    refusals = [line for line in everything.splitlines() if "the hang watchdog is off on this node" in line]
    assert refusals and all(f"uid {PLANTER}" in line and "remove it" in line for line in refusals), everything
