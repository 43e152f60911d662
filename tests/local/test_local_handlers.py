"""Each preemption handler, the rank logs and the exit codes, on whole local runs (`slurmgen run`): the rendered
script, the fake srun/scontrol/scancel, real processes and real signals. The same on the real cluster:
tests/runtime/test_handlers_cluster.py."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import run_slurmgen, slurmgen_argv
from runtime.runtime_helpers import without_steering

from slurmgen import run_history

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent
OWN = ROOT / "tests" / "runtime" / "own_checkpoint.py"
PROGRAMS = ROOT / "tests" / "task_program.py"
PY = sys.executable


class LocalJob:
    """`slurmgen run` of one spec in its own directory, in the background."""

    def __init__(self, cwd: Path, spec: str, *args: str) -> None:
        self.cwd = cwd
        (cwd / "job.yaml").write_text(spec)
        with open(cwd / "runner.err", "wb") as err:
            self.proc = subprocess.Popen(
                slurmgen_argv("run", "job.yaml", *args), cwd=cwd, env=without_steering(), stderr=err
            )

    @property
    def runner(self) -> str:
        return (self.cwd / "runner.err").read_text()

    def job_id(self) -> str:
        self.wait_for(lambda: re.search(r"local-(\d+):", self.runner))
        found = re.search(r"local-(\d+):", self.runner)
        assert found
        return found[1]

    def file(self, name: str) -> str:
        path = self.cwd / "logs" / f"job-{self.job_id()}" / name if name != "batch" else None
        path = path or self.cwd / "logs" / f"job-{self.job_id()}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def everything(self) -> str:
        files = [self.cwd / "runner.err", *sorted((self.cwd / "logs").rglob("*.log"))]
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-2500:]}" for f in files if f.is_file())

    def wait_for(self, found: object, timeout: float = 180) -> object:
        deadline = time.monotonic() + timeout
        while True:
            value = found() if callable(found) else found
            if value:
                return value
            assert self.proc.poll() is None or callable(found), self.everything()
            assert time.monotonic() < deadline, f"timed out waiting\n{self.everything()}"
            time.sleep(0.1)

    def wait_text(self, name: str, pattern: str, count: int = 1, timeout: float = 180) -> str:
        def enough() -> str | None:
            text = self.file(name)
            return text if len(re.findall(pattern, text)) >= count else None

        return str(self.wait_for(enough, timeout))

    def signal(self, sig: str) -> None:
        done = run_slurmgen(
            "run", "--job", self.job_id(), "--signal", sig, cwd=self.cwd, env=without_steering(), timeout=60
        )
        assert done.returncode == 0, done.stderr

    def finish(self, timeout: float = 400) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the local job did not end\n{self.everything()}") from None

    def history(self) -> list[run_history.Run]:
        return run_history.runs(run_history.read(str(self.cwd / "logs" / f"job-{self.job_id()}")))


def spec(command: list[str], *, preemption: str = "{}", extra: str = "") -> str:
    return (
        f"name: job\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 2\n"
        f"python: {PY}\npreemption: {preemption}\n{extra}"
    )


def own_command(cwd: Path, *extra: str, steps: int = 160) -> list[str]:
    return [PY, str(OWN), "--steps", str(steps), "--step-time", "0.05", "--save-every", "20",
            "--snapshot", str(cwd / "snap.pt"), *extra]  # fmt: skip


def check_resume_from_own_checkpoint(job: LocalJob, saved_before: str, steps: int = 160) -> None:
    """Run 2 of every rank starts from the last snapshot run 1 wrote, and every rank finishes."""
    rank0 = job.file("rank-0.log")
    last_saved = re.findall(r"SAVED (\d+) (\S+)", saved_before)[-1]
    for rank in range(4):
        text = job.file(f"rank-{rank}.log")
        resumed = re.findall(r"RESUMED (\d+) (\S+)", text)
        assert resumed == [last_saved], (rank, text[-2000:])
        assert re.search(rf"DONE {steps} \S+ rank=\d", text), text[-2000:]
    assert len(re.findall(rf"DONE {steps} (\S+)", rank0)) == 1


@pytest.mark.torch
def test_an_unmodified_program_is_stopped_gracefully_requeued_and_resumes_from_its_own_checkpoint(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """auto for a program without Preemption, which acts as requeue: SIGUSR1 reaches the batch shell, which stops
    the step with SIGTERM through (fake) scancel, requeues the job once it ended, and run 2 resumes from the
    program's own last snapshot; auto says once why, and how to do better. (handler: requeue itself, which does
    the same without the wait and the notice, runs on the real cluster: tests/runtime/test_handlers_cluster.py.)"""
    steps = 600  # 30 s of steps: auto gives the program 15 s (a quarter of the lead time) to construct Preemption
    command = own_command(tmp_path, steps=steps)
    job = LocalJob(tmp_path, spec(command, preemption="{handler: auto, lead_time: 60}"))
    jobs.append(job)
    job.wait_text("rank-0.log", r"SAVED 40 ")
    job.signal("USR1")
    code = job.finish()
    assert code == 0, job.everything()
    assert "COMPLETED, exit code 0, 2 runs" in job.runner
    batch = job.file("batch")
    run1 = batch[: batch.index("run 2,")]
    assert "SIGUSR1 (requested): stopping the step with SIGTERM; the job is requeued once it has ended" in run1
    assert f"requeue issued for job {job.job_id()} (requested; requeue 1 of 5)" in run1
    warning = "warning: the program did not construct slurmgen's Preemption within 15 s of SIGUSR1, so SIGUSR1 cannot"
    assert batch.count(warning) == 1
    rank0 = job.file("rank-0.log")
    check_resume_from_own_checkpoint(job, rank0[: rank0.index("RESUMED")], steps)
    assert [(r.cause, r.requeued_by) for r in job.history()] == [("requested", "batch-shell"), (None, None)]


@pytest.mark.torch
def test_a_program_that_handles_the_signal_itself_gets_an_early_one_once_its_handler_exists(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """program: the signal comes before the program installs its handler (a framework importing): it neither
    kills the program nor is lost; the supervisor sends it again once /proc shows the handler. The program saves
    and requeues itself; slurmgen does not requeue."""
    # the handler comes 9 s of steps after the signal is sent: the batch shell holds a signal 3 s before it
    # forwards it, and on a loaded machine the request and the forwarding take seconds more
    command = own_command(tmp_path, "--handle", "USR1", "--handler-at", "200", steps=300)
    job = LocalJob(tmp_path, spec(command, preemption="{handler: program}"))
    jobs.append(job)
    job.wait_text("rank-0.log", r"SAVED 20 ")
    job.signal("USR1")
    code = job.finish()
    assert code == 0, job.everything()
    assert "COMPLETED, exit code 0, 2 runs" in job.runner
    for rank in range(4):
        text = job.file(f"rank-{rank}.log")
        early = text.index("slurmgen: SIGUSR1 came before the program installed a handler for it")
        assert early < text.index("slurmgen: SIGUSR1 sent to the program, whose handler is now installed"), text
    rank0 = job.file("rank-0.log")
    assert rank0.index("HANDLER USR1") < rank0.index("STOP ")
    stop = re.findall(r"STOP (\d+) (\S+)", rank0)
    assert len(stop) == 1 and int(stop[0][0]) > 200
    check_resume_from_own_checkpoint(job, rank0[: rank0.index("RESUMED")], steps=300)
    batch = job.file("batch")
    assert "requeue issued" not in batch  # the program requeued itself (scontrol requeue), slurmgen did not
    assert [r.requeued_by for r in job.history()] == ["slurm", None]


@pytest.mark.torch
def test_runtime_forwards_and_an_early_signal_waits_for_preemption(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """runtime: the preemption signal at once (held 3 s by the batch shell, then blocked in every task until
    Preemption unblocks it): saved, requeued by rank 0, resumed, and no warning."""
    (tmp_path / "train_tiny.py").write_text((ROOT / "jobs" / "train_tiny.py").read_text())
    command = [PY, str(tmp_path / "train_tiny.py"), "--steps", "120", "--step-time", "0.02", "--light"]
    job = LocalJob(tmp_path, spec(command, preemption="{handler: runtime}"), "--preempt-after", "0.5")
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 2 runs" in job.runner
    assert "warning" not in job.file("batch")
    assert [(r.cause, r.requeued_by) for r in job.history()] == [("preemption", "rank0"), (None, None)]
    rank0 = job.file("rank-0.log")
    assert re.search(r"rank 0/4: start at step [1-9]\d* on \S+, run 2, last stop: preemption", rank0), rank0


def test_every_line_arrives_whole_in_its_ranks_log_and_live(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """4 ranks on 2 nodes print 20,000 lines each at full speed (print() with PYTHONUNBUFFERED is two writes per
    line): every rank's log holds exactly its own lines, whole and in order; the first line arrived while the
    program was still running."""
    go = tmp_path / "go"
    job = LocalJob(tmp_path, spec([PY, str(PROGRAMS), "lines", "20000", "60", str(go)], preemption="false"))
    jobs.append(job)
    for rank in range(4):
        job.wait_text(f"rank-{rank}.log", rf"READY rank={rank}\n")  # live: the program is waiting for GO
    go.touch()
    assert job.finish() == 0, job.everything()
    check_lines(job.file, 20000, 60)
    assert not (tmp_path / "logs" / "state").exists()  # preemption is off: no state directory
    logs = sorted((tmp_path / "logs" / f"job-{job.job_id()}").glob("127.0.0.*.log"))
    assert len(logs) == 2 and all("line=" not in p.read_text() for p in logs)  # nothing of theirs elsewhere


def check_lines(read: object, count: int, width: int) -> None:
    tail = "x" * width
    for rank in range(4):
        text = read(f"rank-{rank}.log")  # type: ignore[operator]
        lines = text.splitlines()
        assert lines[0] == f"READY rank={rank}" and lines[-1] == f"LINES DONE rank={rank}", lines[:2] + lines[-2:]
        body = lines[1:-1]
        bad = [line for i, line in enumerate(body) if line != f"rank={rank} line={i} {tail}"]
        assert len(body) == count and not bad, (len(body), bad[:3])


def test_the_job_exits_with_the_first_failing_tasks_own_code(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """Rank 1 exits 3; the others are ended with SIGTERM (143, the step's code). The job exits 3, and the batch log
    names rank 1, its node and its log with its last lines."""
    job = LocalJob(tmp_path, spec([PY, str(PROGRAMS), "fail", "1", "3"], preemption="false"))
    jobs.append(job)
    assert job.finish() == 3, job.everything()
    assert "FAILED, exit code 3" in job.runner
    batch = job.file("batch")
    assert "step ended with exit code 143" in batch and "task 0: Terminated" in batch
    assert (
        "rank 1 on 127.0.0.1 failed first: its program exited with code 3; the job exits 3 (the step's 143 comes "
        "from the other tasks' stop)"
    ) in batch
    log = tmp_path / "logs" / f"job-{job.job_id()}" / "rank-1.log"
    assert f"its log: {log}; last lines:\nslurmgen: | STARTED rank=1\nslurmgen: | ValueError: boom at rank 1" in batch
    (run,) = job.history()
    assert (run.exit_code, run.failing) == (3, "rank 1 on 127.0.0.1 (exit 3)")


def test_with_kill_on_bad_exit_off_the_others_finish_and_the_failed_rank_is_the_cause(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """srun: {kill-on-bad-exit: false}. Rank 1 exits 3 at once; ranks 0, 2 and 3 go on, and finish 2 s later with
    exit 0: srun waits for all of them and exits 3. The job exits 3, the batch log names rank 1 as the failure and
    says the others ran on, and the run history's failing rank is rank 1. With recovery on, the one restart names
    rank 1 too, and the same failure again is not restarted a second time."""
    flag = str(tmp_path / "failed")
    command = [PY, str(PROGRAMS), "fail-alone", "1", "3", flag]
    extra = "srun: {kill-on-bad-exit: false}\nrecovery: {max_restarts: 2}\n"
    job = LocalJob(tmp_path, spec(command, preemption="false", extra=extra))
    jobs.append(job)
    assert job.finish() == 3, job.everything()
    assert "FAILED, exit code 3" in job.runner, job.runner
    for rank in (0, 2, 3):
        log = job.file(f"rank-{rank}.log")
        assert log.count(f"FINISHED rank={rank}") == 2, job.everything()  # the first start and its one restart
    batch = job.file("batch")
    assert "task 0: Terminated" not in batch, batch
    assert "rank 1 on 127.0.0.1 failed first: its program exited with code 3; the other tasks ran on" in batch, batch
    events = run_history.read(str(tmp_path / "logs" / f"job-{job.job_id()}"))
    restarts = [e for e in events if e.get("event") == run_history.RESTART]
    assert [(e["cause"], e["rank"], e["exit_code"]) for e in restarts] == [("crash", 1, 3)], events
    (run,) = job.history()
    assert (run.exit_code, run.failing) == (3, "rank 1 on 127.0.0.1 (exit 3)")


OWN_SIGNAL = (
    "import signal, time; signal.signal(signal.SIGUSR1, lambda s, f: (print('got USR1', flush=True), exit(0))); "
    "print('READY', flush=True); time.sleep(120)"
)


def test_a_signal_of_ones_own_reaches_the_program_when_preemption_is_off(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """preemption: false and sbatch: {signal: B:USR1@60}: the batch shell traps the user's signal (bash would end
    the job otherwise) and passes it to the step; the program gets it once."""
    text = spec([PY, "-c", OWN_SIGNAL], preemption="false", extra="sbatch: {signal: 'B:USR1@60'}\n")
    job = LocalJob(tmp_path, text)
    jobs.append(job)
    for rank in range(4):
        job.wait_text(f"rank-{rank}.log", r"READY")
    job.signal("USR1")
    assert job.finish() == 0, job.everything()
    assert all(job.file(f"rank-{rank}.log").count("got USR1") == 1 for rank in range(4))
    assert "batch shell received SIGUSR1" in job.file("batch")


HANDLES_USR1 = (
    "import signal, time; signal.signal(signal.SIGUSR1, lambda s, f: print('got USR1', flush=True)); "
    "print('handler installed', flush=True); time.sleep(4); print('done', flush=True)"
)


def test_an_early_signal_waits_for_a_slow_interpreter_start(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """The entry point's interpreter takes 6 s to start (a cold venv on NFS), the preemption signal comes at
    0.5 s: the batch shell holds it until every task has blocked it, not a fixed 3 s after which it killed them."""
    slow = tmp_path / "slow-python"
    slow.write_text(f'#!/bin/bash\nif [ "$1 $2 $3" = "-m slurmgen.task --" ]; then sleep 6; fi\nexec {PY} "$@"\n')
    slow.chmod(0o755)
    text = spec([PY, "-c", HANDLES_USR1], preemption="{handler: program}").replace(f"python: {PY}", f"python: {slow}")
    job = LocalJob(tmp_path, text, "--preempt-after", "0.5")
    jobs.append(job)
    job.finish()
    for rank in range(4):
        log = job.file(f"rank-{rank}.log")
        assert log.count("got USR1") == 1 and "done" in log, job.everything()
    assert "User defined signal 1" not in job.file("batch") and "signal 10" not in job.file("batch"), job.everything()
    assert not list((tmp_path / "logs").rglob(".ready-run*"))  # the batch shell removed the tasks' ready files
