"""Preemption with real processes, real signals and real torch (gloo), launched through the runtime entry point.

`scontrol` is a recording stand-in here (the real cluster tests are in test_preemption_cluster.py): it lets
these tests count requeue calls exactly.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ranks import Launcher, Ranks

from runtime.runtime_helpers import base_env, free_port
from slurmgen import contract, exit_codes, run_history

pytestmark = [pytest.mark.torch, pytest.mark.slow]

WORKER = Path(__file__).parent / "preempt_worker.py"
VENV_BIN = str(Path(sys.executable).parent)


@dataclass
class Job(Ranks):
    """A launch whose ranks share the test's state directory, as the runs of one job do."""

    state_dir: Path = Path()
    # Through the entry point the program writes its rank's log (LOG_DIR/rank-N.log, shared by the launches of a
    # test as by the runs of a job): this launch's part starts at these offsets.
    offsets: dict[int, int] = field(default_factory=dict)

    def _rank_log(self, rank: int) -> str:
        path = self.log_dir / contract.rank_log_name(rank)
        if rank not in self.offsets or not path.exists():
            return ""
        with open(path, encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offsets[rank])
            return handle.read()

    def out(self, rank: int = 0) -> str:
        return super().out(rank) + self._rank_log(rank)

    def err(self, rank: int = 0) -> str:
        return super().err(rank) + self._rank_log(rank)

    def history(self) -> list[run_history.Run]:
        return run_history.runs(run_history.read(str(self.log_dir)))

    @property
    def log_dir(self) -> Path:
        return self.state_dir.parent / "logs"


@pytest.fixture()
def launch(tmp_path: Path, launcher: Launcher) -> Iterator[object]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "scontrol"
    fake.write_text(f"#!{sys.executable}\n{FAKE_SCONTROL}")
    fake.chmod(0o755)

    def start(
        world: int = 1,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        scontrol: bool = True,
        through_entry: bool = True,
        slurm: dict[str, str] | None = None,
    ) -> Job:
        job = launcher.add(Job(launcher.next_dir(), state_dir=tmp_path / "state"))
        for name, text in (slurm or {}).items():  # what the fake scontrol will say: preempted, completing
            (job.dir / name).write_text(text)
        port = str(free_port())
        path = f"{bindir}:{VENV_BIN}:/usr/bin:/bin" if scontrol else VENV_BIN
        for rank in range(world):
            full = {
                "PATH": path,
                "HOME": str(tmp_path),
                "PYTHONUNBUFFERED": "1",
                "SCONTROL_CALLS": str(job.dir / "scontrol.calls"),
                "SCONTROL_STATE": str(job.dir),
                contract.LOG_DIR: str(tmp_path / "logs"),
                "SLURM_JOB_ID": "77",
                "SLURM_PROCID": str(rank),
                "SLURM_LOCALID": str(rank),
                "SLURM_NTASKS": str(world),
                "SLURM_JOB_NODELIST": "localhost",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                contract.PREEMPT_SIGNAL: "USR1",
                contract.STATE_DIR: str(tmp_path / "state"),
                contract.MAX_REQUEUES: "3",
                contract.SPEC_HASH: "abc123",
                contract.BARRIER_TIMEOUT: "5",
                **(env or {}),
            }
            cmd = [sys.executable, str(WORKER), *(["--dist"] if world > 1 else []), *args]
            if through_entry:
                cmd = [sys.executable, "-m", "slurmgen.task", "--", *cmd]
                log = tmp_path / "logs" / contract.rank_log_name(rank)
                job.offsets[rank] = log.stat().st_size if log.exists() else 0
            job.start(cmd, full)
        return job

    yield start


PREEMPTED = {"preempted": "2026-11-23T10:00:00"}  # scontrol show job: PreemptTime set

# scontrol as slurmctld answers one job: logs every call; `show job` gives RUNNING (PreemptTime when the test wrote
# the file `preempted`), and COMPLETING with one more restart once a requeue was asked for.
FAKE_SCONTROL = """
import os, sys
state = os.environ["SCONTROL_STATE"]
with open(os.environ["SCONTROL_CALLS"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
args = [a for a in sys.argv[1:] if a not in ("-o", "--oneliner")]
requeued = os.path.exists(os.path.join(state, "requeued"))
if args[:2] == ["show", "job"]:
    restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0) + requeued
    preempted = os.path.join(state, "preempted")
    when = open(preempted).read().strip() if os.path.exists(preempted) else "None"
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    ids = f"ArrayJobId={array} ArrayTaskId={os.environ['SLURM_ARRAY_TASK_ID']} " if array else ""
    completing = requeued or os.path.exists(os.path.join(state, "completing"))
    print(f"JobId={os.environ['SLURM_JOB_ID']} {ids}JobState={'COMPLETING' if completing else 'RUNNING'} "
          f"Restarts={restarts} PreemptTime={when}")
elif args[:1] == ["requeue"]:
    open(os.path.join(state, "requeued"), "w").close()
"""


def saves(job: Job) -> int:
    return job.err().count("slurmgen: saved state to")


def test_preemption_signal_saves_requeues_and_exits_once(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch(slurm=PREEMPTED)  # the user signal at preemption: scontrol shows PreemptTime
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    assert job.wait() == [0]
    assert saves(job) == 1
    assert job.calls() == ["requeue Incomplete 77"]
    (run,) = job.history()
    assert (run.cause, run.requeued_by, run.saves) == ("preemption", "rank0", 1)
    stop = next(line for line in job.out().splitlines() if line.startswith("STOP"))
    # The next run resumes exactly where this one stopped.
    again = launch(env={"SLURM_RESTART_COUNT": "1"}, args=("--steps", "0"))
    assert again.wait() == [0]
    resumed = next(line for line in again.out().splitlines() if line.startswith("RESUMED"))
    assert resumed.split()[1:3] == stop.split()[1:3]


def test_a_signal_sent_by_hand_is_a_request_not_a_preemption(launch) -> None:  # type: ignore[no-untyped-def]
    """`scancel --signal=USR1` (or `slurmgen cancel --signal USR1`): Slurm shows no PreemptTime and the time limit
    is far: someone asked, and the requeue counts against the job's own budget."""
    job = launch()
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    assert job.wait() == [0]
    assert job.calls() == ["requeue Incomplete 77"]
    assert "requeue issued for job 77 (requested; requeue 1 of 3)" in job.err()
    (run,) = job.history()
    assert (run.cause, run.requeued_by) == ("requested", "rank0")


def test_signal_then_term_saves_and_requeues_exactly_once(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch()
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    job.signal(signal.SIGTERM)  # what Slurm sends right after a requeue
    assert job.wait() == [0]
    assert saves(job) == 1
    assert job.calls() == ["requeue Incomplete 77"]


def test_term_saves_and_exits_without_requeue(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch()
    job.wait_for("READY")
    job.signal(signal.SIGTERM)
    assert job.wait() == [exit_codes.EXIT_TERMINATED]
    assert saves(job) == 1 and job.calls() == []
    assert "EXIT rank=0 code=143 cause=terminated" in job.out()


def test_usr2_exits_cleanly_without_saving(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch()
    job.wait_for("READY")
    job.signal(signal.SIGUSR2)
    assert job.wait() == [0]
    assert saves(job) == 0 and job.calls() == []
    assert not (job.state_dir / "77.state").exists()


def test_sigcont_is_ignored(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch(args=("--steps", "150"))
    job.wait_for("READY")
    job.signal(signal.SIGCONT)
    assert job.wait() == [0]
    assert "DONE 150" in job.out() and saves(job) == 0


def past_requeues(job_logs: Path, causes: list[str]) -> None:
    """Earlier runs of job 77, each requeued for its cause (what their run history would say)."""
    for run, cause in enumerate(causes, start=1):
        run_history.append(str(job_logs), "rank0", run_history.REQUEUE, run, time.time(), cause=cause)


def near_the_time_limit() -> dict[str, str]:
    """A run that started 500 s ago with a 600 s limit and a 120 s lead: a USR1 now is the limit's warning."""
    started = str(int(time.time()) - 500)
    return {contract.START_TIME: started, contract.TIME_LIMIT: "600", contract.LEAD_TIME: "120"}


def test_the_jobs_own_requeue_budget_ends_it_with_a_message(launch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    past_requeues(tmp_path / "logs", ["time-limit", "time-limit", "time-limit"])
    job = launch(env={"SLURM_RESTART_COUNT": "3", **near_the_time_limit()})
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    assert job.wait() == [exit_codes.EXIT_REQUEUE_BUDGET]
    assert saves(job) == 1 and job.calls() == []
    assert "(time-limit): its requeue budget is used up (3 of 3, preemption.max_requeues)" in job.err()
    assert job.history()[-1].refused == "budget"


def test_preemptions_do_not_use_the_jobs_own_budget(launch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    past_requeues(tmp_path / "logs", ["preemption", "preemption", "preemption"])
    job = launch(env={"SLURM_RESTART_COUNT": "3"}, slurm=PREEMPTED)
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    assert job.wait() == [0]
    assert job.calls() == ["requeue Incomplete 77"]
    assert "requeue issued for job 77 (preemption; preemption 4 of no limit)" in job.err()


def test_the_preemption_budget_when_the_spec_sets_one(launch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    past_requeues(tmp_path / "logs", ["preemption", "time-limit", "preemption"])
    job = launch(env={"SLURM_RESTART_COUNT": "3", contract.MAX_PREEMPTIONS: "2"}, slurm=PREEMPTED)
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    assert job.wait() == [exit_codes.EXIT_REQUEUE_BUDGET]
    assert "its preemption budget is used up (2 of 2, preemption.max_preemptions)" in job.err()


def test_a_term_during_a_grace_time_preemption_saves_and_requeues(launch) -> None:  # type: ignore[no-untyped-def]
    """PreemptMode=REQUEUE with GraceTime and no user signal: SIGTERM reaches the tasks only, the job still RUNS
    with PreemptTime set, and Slurm would not requeue a job that ends before its grace: rank 0 requeues it."""
    job = launch(slurm=PREEMPTED)
    job.wait_for("READY")
    job.signal(signal.SIGTERM)
    assert job.wait() == [0]
    assert saves(job) == 1 and job.calls() == ["requeue Incomplete 77"]
    (run,) = job.history()
    assert (run.cause, run.requeued_by) == ("preemption", "rank0")


def test_since_24_05_a_grace_time_preemption_is_left_to_slurm_to_requeue(launch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same preemption where the batch shell recorded Slurm 24.11 and PreemptMode=REQUEUE at the run's start:
    Slurm requeues a job that ends in its grace itself (src/slurmctld/proc_req.c, since 24.05), and a requeue of
    ours would make it requeue the next run again as it completes. Rank 0 saves, says so and exits."""
    site = {"mode": "REQUEUE", "grace": 10, "version": "24.11.5"}
    run_history.append(str(tmp_path / "logs"), "batch-shell", run_history.RUN_START, 1, 1.0, site=site)
    job = launch(slurm=PREEMPTED)
    job.wait_for("READY")
    job.signal(signal.SIGTERM)
    assert job.wait() == [0]
    assert saves(job) == 1 and job.calls() == []
    assert "Slurm requeues this job as it ends" in job.err()
    assert "EXIT rank=0 code=0 cause=preemption" in job.out()


def test_a_term_of_a_job_slurm_is_ending_saves_and_leaves_the_requeue_to_the_batch_shell(launch) -> None:  # type: ignore[no-untyped-def]
    """PreemptMode=CANCEL (or REQUEUE without grace): the job is COMPLETING when the TERM comes; a requeue
    Incomplete would be a silent no-op, and the batch shell requeues a cancelled job (batch/commands.py)."""
    job = launch(slurm={**PREEMPTED, "completing": ""})
    job.wait_for("READY")
    job.signal(signal.SIGTERM)
    assert job.wait() == [0]
    assert saves(job) == 1 and job.calls() == []
    (run,) = job.history()
    assert (run.cause, run.requeued_by) == ("preemption", None)


def test_array_task_requeues_only_itself(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch(env={"SLURM_JOB_ID": "105", "SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "3"})
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    assert job.wait() == [0]
    assert job.calls() == ["requeue Incomplete 100_3"]
    assert (job.state_dir / "100_3.state").exists()


@pytest.mark.parametrize("how", ["scontrol is not on PATH", "inside a container"])
def test_without_scontrol_the_batch_shell_is_asked(launch, how: str) -> None:  # type: ignore[no-untyped-def]
    job = launch(scontrol=how != "scontrol is not on PATH", env={contract.CONTAINER: "1"} if "container" in how else {})
    job.wait_for("READY")
    job.signal(signal.SIGUSR1)
    assert job.wait() == [0]
    assert job.calls() == []
    marker = job.state_dir / contract.requeue_marker_name("77")
    assert marker.read_text().strip() == "preemption"
    assert f"asked the batch shell to requeue job 77 (preemption; {how})" in job.err()


def test_signal_before_the_program_is_ready_is_kept(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch()
    time.sleep(0.3)  # the entry point has exec'd python, which is still importing torch
    assert "READY" not in job.out()
    job.signal(signal.SIGUSR1)
    assert job.wait() == [0], job.err()  # not killed by the default action: blocked, then handled
    assert "READY" in job.out() and job.calls() == ["requeue Incomplete 77"]


def test_state_of_another_job_is_not_resumed(launch) -> None:  # type: ignore[no-untyped-def]
    first = launch()
    first.wait_for("READY")
    first.signal(signal.SIGTERM)
    first.wait()
    other = launch(env={contract.SPEC_HASH: "different"}, args=("--steps", "0"))
    assert other.wait() == [0]
    assert "RESUMED" not in other.out()
    assert "not resuming from" in other.err() and "spec abc123, this is job 77 with spec different" in other.err()


def test_a_resubmitted_job_starts_from_the_state_of_the_job_it_resumes(launch) -> None:  # type: ignore[no-untyped-def]
    """`slurmgen resume` of a job Slurm forgot submits its script again with SLURMGEN_RESUME_FROM: job 88 starts
    from job 77's state (same spec), then saves under its own key; another spec is still refused."""
    first = launch()
    first.wait_for("READY")
    first.signal(signal.SIGTERM)
    first.wait()
    stop = next(line for line in first.out().splitlines() if line.startswith("STOP"))
    other = launch(env={contract.SPEC_HASH: "different", "SLURM_JOB_ID": "88", contract.RESUME_FROM: "77"},
                   args=("--steps", "0"))  # fmt: skip
    assert other.wait() == [0] and "RESUMED" not in other.out()
    again = launch(env={"SLURM_JOB_ID": "88", contract.RESUME_FROM: "77"}, args=("--steps", "0"))
    assert again.wait() == [0]
    resumed = next(line for line in again.out().splitlines() if line.startswith("RESUMED"))
    assert resumed.split()[1:3] == stop.split()[1:3]
    assert "(job 77's state, saved by run 1" in again.err()


def test_kill_during_a_save_keeps_the_previous_state(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch(args=("--save-every", "1", "--state-mb", "64", "--step-time", "0"))
    job.wait_for("SAVED 1")
    pattern = f".{'77.state'}."
    deadline = time.monotonic() + 30
    while not any(p.name.startswith(pattern) for p in job.state_dir.iterdir()):
        assert time.monotonic() < deadline, "never caught a save in progress"
        time.sleep(0.001)
    job.signal(signal.SIGKILL)
    job.wait()
    leftovers = [p for p in job.state_dir.iterdir() if p.name.startswith(pattern)]
    assert leftovers, "the kill landed outside a write; the test proves nothing"
    # The previous state is intact, and it is what the next run loads; the leftover is swept at start.
    again = launch(env={"SLURM_RESTART_COUNT": "1"}, args=("--steps", "0", "--state-mb", "64"))
    assert again.wait() == [0], again.err()
    resumed = next(line for line in again.out().splitlines() if line.startswith("RESUMED"))
    last_saved = max(int(line.split()[1]) for line in job.out().splitlines() if line.startswith("SAVED"))
    assert int(resumed.split()[1]) in (last_saved, last_saved + 1)
    assert not [p for p in job.state_dir.iterdir() if p.name.startswith(pattern)]
    assert "left by a save that was interrupted" in again.err()


def test_ranks_agree_to_stop_at_the_same_step(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch(world=4)
    for rank in range(4):
        job.wait_for("READY", rank)
    job.signal(signal.SIGUSR1, rank=2)  # only one rank hears it
    assert job.wait() == [0, 0, 0, 0]
    stops = {job.out(r).split("STOP ")[1].split()[0] for r in range(4)}
    assert len(stops) == 1, stops
    assert saves(job) == 1 and job.calls() == ["requeue Incomplete 77"]
    assert all("saved state" not in job.err(r) for r in (1, 2, 3))


def test_a_dead_rank_makes_the_others_exit_with_the_message(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch(world=3)
    for rank in range(3):
        job.wait_for("READY", rank)
    job.signal(signal.SIGKILL, rank=1)
    started = time.monotonic()
    codes = [job.procs[r].wait(timeout=30) for r in (0, 2)]
    # At once: the dead rank's connections close (the process-group timeout here is the default 600 s).
    assert time.monotonic() - started < 20  # not the process-group timeout (600 s): about 1 s on a quiet machine
    assert codes == [exit_codes.EXIT_PEER_LOST, exit_codes.EXIT_PEER_LOST]
    for rank in (0, 2):
        assert "a peer rank died or stopped answering" in job.err(rank) or "lost the other ranks" in job.err(rank)
    assert all(p.poll() is not None for p in job.procs)


def test_a_stuck_rank_makes_the_others_exit_after_the_process_group_timeout(launch) -> None:  # type: ignore[no-untyped-def]
    job = launch(world=2, env={contract.PG_TIMEOUT: "6"})
    for rank in range(2):
        job.wait_for("READY", rank)
    job.signal(signal.SIGSTOP, rank=1)  # alive, connections open, never answers
    started = time.monotonic()
    assert job.procs[0].wait(timeout=60) == exit_codes.EXIT_PEER_LOST
    assert 6 - 1 < time.monotonic() - started < 6 + 20  # the process-group timeout, plus a busy machine's slack
    assert "did not answer within 6 s" in job.err(0) or "a peer rank died or stopped answering" in job.err(0)


def test_a_slow_rank_is_waited_for_not_taken_for_lost(launch) -> None:  # type: ignore[no-untyped-def]
    """Rank 0 pauses far longer than the barrier timeout (5 s) between two agreements, as a large periodic
    save does; the others wait in should_stop() and the run goes on, then stops together on a signal."""
    job = launch(world=3, args=("--stall", "0:20:9"))
    job.wait_for("STALL 20", 0)
    job.wait_for("STEP 25", 0, timeout=30)
    job.signal(signal.SIGUSR1, rank=1)
    assert job.wait() == [0, 0, 0], [job.err(r)[-500:] for r in range(3)]
    assert not any("lost the other ranks" in job.err(r) for r in range(3))
    stops = {job.out(r).split("STOP ")[1].split()[0] for r in range(3)}
    assert len(stops) == 1 and int(stops.pop()) > 21
    assert saves(job) == 1 and job.calls() == ["requeue Incomplete 77"]


def test_ranks_that_finish_exit_cleanly(launch) -> None:  # type: ignore[no-untyped-def]
    """The stop agreement's gloo group is closed at exit: left to interpreter shutdown, its threads were
    destroyed while joinable and the process aborted ("terminate called without an active exception") in
    about a third of normal exits, which srun's --kill-on-bad-exit turned into a failed job."""
    for _ in range(6):  # ~4 in 10 two-rank runs aborted before the fix
        job = launch(
            world=2,
            args=("--steps", "20", "--step-time", "0"),
            through_entry=False,
            env={contract.BARRIER_TIMEOUT: "60"},
        )
        assert job.wait() == [0, 0], [job.err(r)[-500:] for r in range(2)]
        assert all("DONE 20" in job.out(r) for r in range(2))
        assert not any("terminate called" in job.err(r) for r in range(2))


LATE_INIT = """
import os
from slurmgen.runtime import Preemption, destroy, init_distributed
pre = Preemption(path=os.path.join(os.environ["OUT"], "x.state"))
before = pre.timeout
init_distributed(timeout=42)
print(before, pre.timeout, flush=True)
destroy()
"""


def test_a_preemption_made_before_init_distributed_follows_its_timeout(tmp_path: Path) -> None:
    """The stop agreement's patience is the process group's: init_distributed(timeout=42) called after
    Preemption() still sets it (the spec's SLURMGEN_TIMEOUT is only the fallback)."""
    env = base_env(
        OUT=str(tmp_path), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", LOCAL_RANK="0",
        WORLD_SIZE="1", SLURMGEN_TIMEOUT="900", GLOO_SOCKET_IFNAME="lo",
    )  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", LATE_INIT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["900.0", "42.0"]
