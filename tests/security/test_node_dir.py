"""The node's own directory (/dev/shm/slurmgen-<uid>-<crc>-<node>, progress_mark.node_dir) when another user of the
node made it first: its name is computable by anyone. Such a directory (another user's, a link, a loose mode) is
never used, and the job is not failed for it: a fresh private directory (mkdtemp: random name, 0700, ours) takes
its place, recorded in the log directory (node-dirs/), and the step's end removes it. The planter is uid 65534;
the victim's code runs as uid 1 (a non-root user: root would pass an owner check the kernel makes for it), in a
forked child."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from security.other_users import PLANTER, VICTIM, as_victim, need_root, plant
from slurmgen import contract
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import NODE_DIRS, ProgressMark, expected_node_dir, node_dir


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
        for left in glob.glob(folder + "-*"):  # a fresh one a failed test left
            shutil.rmtree(left, ignore_errors=True)


def victims_node_dir(env: dict[str, str]) -> str:
    """The victim's node directory, as its own processes name it (the uid is in the name)."""
    head, name = os.path.split(expected_node_dir(JobContext.from_environ(env)))
    return os.path.join(head, name.replace(f"slurmgen-{os.getuid()}-", f"slurmgen-{VICTIM}-", 1))


def start_watch(env: dict[str, str]) -> Callable[[], str]:
    from slurmgen.task import node_watch, watchdog  # noqa: F401 - imported here: the victim cannot read the library

    def act() -> str:
        said: list[str] = []
        stop = watchdog.start(JobContext.from_environ(env), 0, os.getpid(), said.append)
        if stop is not None:
            stop.set()
        mark = ProgressMark(JobContext.from_environ(env), 0)
        if mark.node_path is not None:
            mark.touch(3)
        used = node_dir(JobContext.from_environ(env))
        info = os.lstat(used)
        watchdog.leave_node(JobContext.from_environ(env), 0, 0.0)  # the step's end: the node's only task leaves
        return "\n".join([f"watching={stop is not None}", f"marks={mark.node_path is not None}",
                          f"used={used}", f"mode={info.st_mode & 0o777:o} uid={info.st_uid} gone="
                          f"{not os.path.lexists(used)}", *said])  # fmt: skip

    return act


def check_fresh(env: dict[str, str], said: list[str], planted: str, why: str) -> None:
    """The watchdog and the mark ran in a fresh private directory, not the planted one; it was recorded, said in
    one line, and removed at the end."""
    assert said[:2] == ["watching=True", "marks=True"], said
    used = said[2].removeprefix("used=")
    assert used.startswith(planted + "-") and said[3] == f"mode=700 uid={VICTIM} gone=True", said
    assert len(said) == 5 and planted in said[4] and why in said[4] and used in said[4], said
    assert (Path(env[contract.LOG_DIR]) / NODE_DIRS / os.path.basename(planted)).read_text() == used + "\n"


def test_a_node_directory_another_user_made_first_is_not_used_and_a_fresh_private_one_is(
    job_env: dict[str, str],
) -> None:
    folder = victims_node_dir(job_env)
    plant(f"mkdir -m 777 {folder} && touch {folder}/hang {folder}/release {folder}/rank-0")
    said = as_victim(start_watch(job_env)).splitlines()
    check_fresh(job_env, said, folder, f"owned by uid {PLANTER}")
    assert sorted(os.listdir(folder)) == ["hang", "rank-0", "release"]  # nothing of ours went into it


def test_a_link_planted_as_the_node_directory_is_not_followed_and_a_fresh_private_one_is_used(
    job_env: dict[str, str],
) -> None:
    folder = victims_node_dir(job_env)
    target = tempfile.mkdtemp(prefix="slurmgen-elsewhere-")
    os.chown(target, VICTIM, VICTIM)
    try:
        plant(f"ln -s {target} {folder}")
        said = as_victim(start_watch(job_env)).splitlines()
        check_fresh(job_env, said, folder, "is a symbolic link")
        assert os.listdir(target) == []  # nothing written through the link
    finally:
        os.unlink(folder)
        shutil.rmtree(target)


def test_the_victims_own_node_directory_with_a_loose_mode_is_not_used_either(job_env: dict[str, str]) -> None:
    folder = victims_node_dir(job_env)
    os.mkdir(folder, 0o700)
    os.chmod(folder, 0o777)  # noqa: S103 - the loose mode under test
    os.chown(folder, VICTIM, VICTIM)
    said = as_victim(start_watch(job_env)).splitlines()
    check_fresh(job_env, said, folder, "mode 777")


def test_the_users_own_node_directory_is_made_private_and_watched(job_env: dict[str, str]) -> None:
    folder = victims_node_dir(job_env)
    said = as_victim(start_watch(job_env)).splitlines()
    assert said == ["watching=True", "marks=True", f"used={folder}", f"mode=700 uid={VICTIM} gone=True"], said


def test_the_end_of_the_step_never_removes_another_users_node_directory(job_env: dict[str, str]) -> None:
    from slurmgen.task import watchdog

    folder = victims_node_dir(job_env)
    plant(f"mkdir -m 777 {folder} && touch {folder}/hang")

    def leave() -> str:
        watchdog.leave_node(JobContext.from_environ(job_env), 0, 0.0)
        return "left"

    assert as_victim(leave) == "left"
    assert sorted(os.listdir(folder)) == ["hang"] and os.stat(folder).st_uid == PLANTER


def test_the_batch_shells_clear_removes_the_users_own_left_directory_and_never_another_users(
    job_env: dict[str, str],
) -> None:
    """After the step the batch shell clears its node's directory (progress_mark.clear_node_dir): the victim's own
    one, left by a task killed before its supervisor left it, goes with its marks; another user's planted under the
    same name stays as it was, and so does the link a planter put in the place of the name."""
    from slurmgen.progress_mark import clear_node_dir

    folder = victims_node_dir(job_env)

    def left_then_cleared() -> str:
        job = JobContext.from_environ(job_env)
        ProgressMark(job, 0).touch(5, 5)  # the mark a task killed by the step's SIGKILL left
        made = os.path.isdir(folder)
        clear_node_dir(job)
        return f"made={made} gone={not os.path.exists(folder)}"

    assert as_victim(left_then_cleared) == "made=True gone=True"

    def cleared() -> str:
        clear_node_dir(JobContext.from_environ(job_env))
        return "cleared"

    plant(f"mkdir -m 777 {folder} && touch {folder}/hang")
    assert as_victim(cleared) == "cleared"
    assert sorted(os.listdir(folder)) == ["hang"] and os.stat(folder).st_uid == PLANTER
    shutil.rmtree(folder)
    with tempfile.TemporaryDirectory() as target:
        Path(target, "keep").write_text("x")
        plant(f"ln -s {target} {folder}")
        assert as_victim(cleared) == "cleared"
        assert os.path.islink(folder) and Path(target, "keep").exists()
        os.unlink(folder)


def test_a_local_job_whose_node_directory_another_user_keeps_touching_runs_to_its_end(tmp_path: Path) -> None:
    """The whole attack on a real local run (`slurmgen run`): the other user made the node directory first and
    touches `hang`, the ranks' `dumped-N` and `release` in it every 0.1 s, which before made the watchdog of the
    node's second task end its healthy program as hung within about a second, at every restart, until the
    repeated-failure rule ended the job. Now the node's tasks agree on a fresh private directory, the watchdog
    runs there (the program prints: its progress), the job ends well, and no directory of ours is left in
    /dev/shm. The victim is the test's user (root): the refusal is slurmgen's own owner check, which root does not
    pass either."""
    import subprocess
    import sys

    from cli_run import run_slurmgen

    need_root()
    tmp_path.chmod(0o755)
    # the local id is the first free one here (a port or a state another run holds is skipped): plant for each
    folders = [expected_node_dir(JobContext.from_environ({contract.LOG_DIR: str(tmp_path / "logs" / f"job-{n}"),
               "SLURMD_NODENAME": "127.0.0.1"})) for n in range(1, 10)]  # fmt: skip
    listed = " ".join(folders)
    toucher = subprocess.Popen(
        ["setpriv", "--reuid", str(PLANTER), "--regid", str(PLANTER), "--clear-groups", "sh", "-c",
         f"for d in {listed}; do mkdir -m 777 $d; done; while :; do for d in {listed}; do "
         "touch $d/hang $d/dumped-0 $d/dumped-1 $d/release; done; sleep 0.1; done"],
    )  # fmt: skip
    program = "import time; [print(n, flush=True) or time.sleep(0.2) for n in range(20)]"
    try:
        (tmp_path / "job.yaml").write_text(
            f"name: job\ncommand: [{sys.executable!r}, '-c', {program!r}]\ntime: '00:10:00'\n"
            f"nodes: 1\ntasks_per_node: 2\npython: {sys.executable}\nrecovery: {{hang_timeout: 2}}\n"
        )
        done = run_slurmgen("run", "job.yaml", cwd=tmp_path)
        left = [path for folder in folders for path in glob.glob(folder + "-*")]
    finally:
        toucher.kill()
        toucher.wait()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
            for path in glob.glob(folder + "-*"):
                shutil.rmtree(path, ignore_errors=True)
    everything = done.stderr + "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").rglob("*.log"))
    assert done.returncode == 0, everything
    assert "no progress on any rank" not in everything and "restart" not in everything.lower(), everything
    taken = [line for line in everything.splitlines() if "this node's directory for the job is" in line]
    assert len(taken) == 2 and all(f"uid {PLANTER}" in line for line in taken), everything  # one per task
    assert len({line.split(" is ")[-2] for line in taken}) == 1, taken  # both tasks in the same directory
    assert "watchdog is off" not in everything, everything
    assert left == [], left  # the step's end removed ours
    assert list((tmp_path / "logs").glob(f"job-*/{NODE_DIRS}/*"))  # which name was taken, recorded
