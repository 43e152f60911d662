"""The node's own directory (/dev/shm, progress_mark.node_dir) lives as long as the step on that node: the last of
the node's tasks to end removes it (task/watchdog.py, leave_node), and only then; a real local run leaves none."""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path

from cli_run import local_job_id, run_slurmgen

from slurmgen import contract
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import expected_node_dir, node_dir, write_node_file
from slurmgen.task import watchdog


def env(log: Path, local_id: int) -> dict[str, str]:
    return {contract.LOG_DIR: str(log), contract.HANG_TIMEOUT: "20", "SLURMD_NODENAME": "n1",
            "SLURM_LOCALID": str(local_id), "SLURM_PROCID": str(local_id), "SLURM_NTASKS": "2",
            "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_NODEID": "0"}  # fmt: skip


def test_the_last_task_of_the_node_to_end_removes_the_directory_and_not_before(tmp_path: Path) -> None:
    first, second = JobContext.from_environ(env(tmp_path, 0)), JobContext.from_environ(env(tmp_path, 1))
    folder = node_dir(first)
    began = os.stat(tmp_path).st_mtime - 1  # both supervisors started before now
    try:
        write_node_file(os.path.join(folder, "rank-0"), "5\n")
        watchdog.leave_node(first, 0, began)
        assert os.path.isdir(folder)  # rank 1 still runs: its watch reads the directory
        watchdog.leave_node(second, 1, began)
        assert not os.path.exists(folder)
    finally:
        if os.path.isdir(folder):
            import shutil

            shutil.rmtree(folder)


def test_a_note_left_by_an_earlier_start_of_the_step_does_not_count(tmp_path: Path) -> None:
    first, second = JobContext.from_environ(env(tmp_path, 0)), JobContext.from_environ(env(tmp_path, 1))
    folder = node_dir(first)
    try:
        write_node_file(os.path.join(folder, "rank-0"), "5\n")
        watchdog.leave_node(second, 1, 0.0)  # the earlier start: rank 1 left, rank 0 was killed
        os.utime(os.path.join(folder, "left-1"), (100.0, 100.0))
        watchdog.leave_node(first, 0, 200.0)  # this start began at 200: rank 1 of this start still runs
        assert os.path.isdir(folder)
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def test_in_a_slurm_step_a_task_that_ended_before_its_siblings_supervisor_began_still_counts(tmp_path: Path) -> None:
    """A program of a second that ends before the node's other supervisor has even started (a loaded node starts
    its tasks apart): its note names the start of the step, so the last to leave removes the directory. A note of
    the step before (a restart inside the allocation runs a new srun, a new SLURM_STEP_ID) does not count."""

    def job(local_id: int, step: int) -> JobContext:
        return JobContext.from_environ({**env(tmp_path, local_id), contract.STEP_ID: str(step)})

    folder = node_dir(job(0, 3))
    try:
        write_node_file(os.path.join(folder, "rank-0"), "5\n")
        watchdog.leave_node(job(1, 3), 1, 0.0)
        os.utime(os.path.join(folder, "left-1"), (100.0, 100.0))  # long before rank 0's supervisor began, at 200
        assert os.path.isdir(folder)
        watchdog.leave_node(job(0, 3), 0, 200.0)
        assert not os.path.exists(folder)

        write_node_file(os.path.join(folder, "rank-0"), "5\n")  # the next start's marks make the directory again
        watchdog.leave_node(job(1, 4), 1, 0.0)  # the step before: its rank 1 left, its rank 0 was killed
        watchdog.leave_node(job(0, 5), 0, 0.0)  # this step's rank 0 leaves; its rank 1 still runs
        assert sorted(os.listdir(folder)) == ["left-0", "left-1", "rank-0"]
        watchdog.leave_node(job(1, 5), 1, 0.0)
        assert not os.path.exists(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_planted_leave_note_a_link_or_a_fifo_counts_for_nothing_and_the_directory_stays(tmp_path: Path) -> None:
    """A leave note is read by the rule of every file of the node's directory: a link to a file naming this start,
    a FIFO (never waited on) or a file another user wrote there counts for nothing, so rank 1's leave does not take
    the directory from rank 0, which still runs."""

    def job(local_id: int) -> JobContext:
        return JobContext.from_environ({**env(tmp_path, local_id), contract.STEP_ID: "3"})

    folder = node_dir(job(1))
    start = watchdog.start_of_step(job(1))
    forged = tmp_path / "forged"
    forged.write_text(start)
    try:
        write_node_file(os.path.join(folder, "rank-0"), "5\n")
        for plant in ("link", "fifo", "other"):
            note = os.path.join(folder, "left-0")
            if plant == "link":
                os.symlink(forged, note)
            elif plant == "fifo":
                os.mkfifo(note, 0o600)
            else:
                write_node_file(note, start)
                os.chown(note, 65534, 65534)
            watchdog.leave_node(job(1), 1, 0.0)
            assert os.path.isdir(folder), plant
            assert watchdog.count_naming(folder, start) == 1, plant  # rank 1's own note only
            os.unlink(note)
        watchdog.leave_node(job(0), 0, 0.0)  # rank 0's own note: now both have left
        assert not os.path.exists(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_local_run_with_the_watchdog_leaves_no_node_directory(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        f"name: job\ncommand: [{sys.executable!r}, '-c', 'import time; time.sleep(1)']\ntime: '00:10:00'\n"
        f"nodes: 2\ntasks_per_node: 2\npython: {sys.executable}\nrecovery: {{hang_timeout: 30}}\n"
    )
    done = run_slurmgen("run", "job.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    log_dir = tmp_path / "logs" / f"job-{local_job_id(done)}"
    assert log_dir.is_dir()
    # the expected names, and any fresh private one taken in place of a planted one (progress_mark.node_dir)
    pattern = expected_node_dir(JobContext.from_environ({contract.LOG_DIR: str(log_dir), "SLURMD_NODENAME": "*"}))
    assert glob.glob(pattern + "*") == []


KILLS_ITS_SUPERVISOR = """
import os, signal, sys, time
if os.environ["SLURM_PROCID"] == "3" and not os.path.exists("killed"):
    open("killed", "w").close()
    os.kill(os.getppid(), signal.SIGKILL)  # the task's supervisor: it never leaves the node's directory
time.sleep(1)
"""


def test_a_local_run_leaves_no_node_directory_of_a_task_whose_supervisor_was_killed(tmp_path: Path) -> None:
    """On the second emulated node, rank 3's supervisor dies by SIGKILL before it can note its leave (as srun's
    SIGKILL after the kill wait ends one): once the run has no process left, the runner clears every node's
    directory, as a site's per-job /dev/shm would go."""
    (tmp_path / "prog.py").write_text(KILLS_ITS_SUPERVISOR)
    (tmp_path / "job.yaml").write_text(
        f"name: job\ncommand: [{sys.executable!r}, prog.py]\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 2\n"
        f"python: {sys.executable}\nrecovery: {{hang_timeout: 30, max_restarts: 0}}\n"
    )
    done = run_slurmgen("run", "job.yaml", cwd=tmp_path)
    assert (tmp_path / "killed").exists(), done.stderr  # the supervisor was killed
    log_dir = tmp_path / "logs" / f"job-{local_job_id(done)}"
    pattern = expected_node_dir(JobContext.from_environ({contract.LOG_DIR: str(log_dir), "SLURMD_NODENAME": "*"}))
    assert glob.glob(pattern + "*") == [], done.stderr


def test_without_the_watchdog_only_the_first_nodes_ranks_keep_marks_there_and_its_batch_shell_clears_it(
    tmp_path: Path,
) -> None:
    """A cluster job without the hang watchdog keeps node marks on the step's first node only (rank 0's, read for
    its program's last step when it was killed; progress_mark.node_marks): the second node's ranks write nothing
    in /dev/shm, and the first node's directory goes at the batch shell's end of the step, also when no task left
    it (each was killed before its supervisor could)."""
    from slurmgen.progress_mark import ProgressMark, clear_node_dir, node_marks

    log = tmp_path / "logs"
    log.mkdir()
    first = {k: v for k, v in env(log, 0).items() if k != contract.HANG_TIMEOUT}
    second = {**first, "SLURMD_NODENAME": "n2", "SLURM_NODEID": "1", "SLURM_PROCID": "2"}
    assert node_marks(JobContext.from_environ(first)) and not node_marks(JobContext.from_environ(second))
    assert node_marks(JobContext.from_environ({**second, contract.HANG_TIMEOUT: "20"}))  # the watchdog reads them
    for job_env in (first, second):
        ProgressMark(JobContext.from_environ(job_env), int(job_env["SLURM_PROCID"])).touch(3, 3)
    here, there = (expected_node_dir(JobContext.from_environ(e)) for e in (first, second))
    try:
        assert os.path.isdir(here) and not os.path.exists(there)
        clear_node_dir(JobContext.from_environ(first))
        assert not os.path.exists(here)
    finally:
        for folder in (here, there):
            shutil.rmtree(folder, ignore_errors=True)  # a failed test's leftover
