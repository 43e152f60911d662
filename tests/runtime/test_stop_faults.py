"""The stop path under faults, with real processes: a PATH-wrapped `scontrol` that fails, times out or cannot reach
its controller, at the job's record, at rank 0's requeue or at both requeues, and a preemption signal during a
finished program's teardown.

Each test asserts what matters to the user: no job and no resume state is lost, and a finished job ends COMPLETED.
The decision itself is tested as a table in tests/test_interruption.py."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from slurmgen import contract, exit_codes, run_history
from slurmgen.batch import commands as batch
from slurmgen.job_context.context import JobContext
from slurmgen.requeue import requeue_this_job
from slurmgen.slurm.client import SlurmClient, run_command
from slurmgen.slurm.retry import Retry

from .runtime_helpers import base_env

# A scontrol on PATH that emulates slurmctld for one job 77 (its state in job.json beside it) and fails the first
# `fail` calls whose subcommand is in `only`: "unreachable" (what scontrol prints when slurmctld is down), "timeout"
# (no answer: it sleeps past the client's time-out) or "error" (a transient RPC error).
WRAPPER = r"""
import json, os, sys, time
here = os.path.dirname(os.path.abspath(sys.argv[0]))
path = os.path.join(here, "job.json")
job = json.load(open(path))
args = sys.argv[1:]
verb = "show" if "show" in args else args[0]
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(" ".join(args) + "\n")
if job["fail"] > 0 and verb in job["only"]:
    job["fail"] -= 1
    json.dump(job, open(path, "w"))
    if job["how"] == "timeout":
        time.sleep(30)
    if job["how"] == "unreachable":
        sys.stderr.write("scontrol: error: Unable to contact slurm controller (connect failure)\n")
    else:
        sys.stderr.write("scontrol: error: Socket timed out on send/recv operation\n")
    sys.exit(1)
if verb == "show":
    print("JobId=77 JobName=t JobState=%s Reason=None Requeue=1 Restarts=%d ExitCode=0:0 PreemptTime=%s Partition=low"
          % (job["state"], job["restarts"], job["preempt"] or "None"))
elif verb == "requeue":
    if job["state"] == "PENDING":
        sys.stderr.write("scontrol: error: Job is pending execution for job 77\n")
        sys.exit(1)
    if "Incomplete" not in args or job["state"] == "RUNNING":
        job["state"], job["restarts"] = job.get("after", "COMPLETING"), job["restarts"] + 1
        json.dump(job, open(path, "w"))
else:
    sys.exit(2)
"""

NO_WAIT = Retry(sleep=lambda seconds: None)


def wrapper(tmp_path: Path, *, fail: int, how: str, only: tuple[str, ...], **job: object) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "scontrol"
    exe.write_text(f"#!{sys.executable}\n{WRAPPER}")
    exe.chmod(0o755)
    state = {"state": "RUNNING", "restarts": 0, "preempt": None, "fail": fail, "how": how, "only": list(only), **job}
    (bin_dir / "job.json").write_text(json.dumps(state))
    return bin_dir


def client(bin_dir: Path) -> SlurmClient:
    """The real client, running the wrapper as a subprocess (1 s time-out, so a "timeout" costs a second)."""
    return SlurmClient(env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, timeout=1.0)


def job_of(bin_dir: Path) -> dict[str, object]:
    return dict(json.loads((bin_dir / "job.json").read_text()))


def env_for(tmp_path: Path) -> dict[str, str]:
    return {
        "SLURM_JOB_ID": "77",
        contract.LOG_DIR: str(tmp_path / "logs"),
        contract.STATE_DIR: str(tmp_path / "state"),
        contract.PREEMPT_SIGNAL: "USR1",
        contract.MAX_REQUEUES: "3",
    }


def state_file(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir(exist_ok=True)
    path = tmp_path / "state" / "77.state"
    path.write_bytes(b"the state of 72 steps")
    return path


def run_end(tmp_path: Path) -> dict[str, object]:
    return next(e for e in run_history.read(str(tmp_path / "logs")) if e["event"] == run_history.RUN_END)


@pytest.mark.parametrize("how", ["timeout", "unreachable"])
def test_a_requeue_rank_0_made_keeps_the_state_when_show_job_fails(tmp_path: Path, how: str) -> None:
    """Rank 0 requeued the job (its run history says so); `scontrol show job` inside `end` never
    answers. The batch shell used to take that for "completed, not requeued" and delete the state."""
    logs = str(tmp_path / "logs")
    run_history.append(logs, "rank0", run_history.STOP, 1, 1.0, cause="preemption")
    run_history.append(logs, "rank0", run_history.REQUEUE, 1, 2.0, cause="preemption")
    state = state_file(tmp_path)
    bin_dir = wrapper(tmp_path, fail=99, how=how, only=("show",), state="COMPLETING", restarts=1)
    said: list[str] = []
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), said.append, client(bin_dir), NO_WAIT) == 0
    assert state.exists(), said
    assert (run_end(tmp_path)["requeued"], run_end(tmp_path)["ended"]) == (True, "requeued")
    assert job_of(bin_dir)["restarts"] == 1  # no second requeue


def test_show_job_timing_out_once_is_retried(tmp_path: Path) -> None:
    """The smallest case: one time-out inside `end`; the retry gets the answer (the job is requeued)."""
    state = state_file(tmp_path)
    bin_dir = wrapper(tmp_path, fail=1, how="timeout", only=("show",), state="COMPLETING", restarts=1)
    pauses: list[float] = []
    code = batch.end(
        0, JobContext.from_environ(env_for(tmp_path)), lambda line: None, client(bin_dir), Retry(sleep=pauses.append)
    )
    assert code == 0 and state.exists() and pauses == [1.0]
    assert run_end(tmp_path)["ended"] == "requeued"


def test_a_completed_job_whose_slurm_cannot_be_asked_keeps_its_state_and_says_so(tmp_path: Path) -> None:
    state = state_file(tmp_path)
    bin_dir = wrapper(tmp_path, fail=99, how="unreachable", only=("show",))
    said: list[str] = []
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), said.append, client(bin_dir), NO_WAIT) == 0
    assert state.exists()
    assert said == [
        "Slurm could not be asked whether job 77 was requeued: its resume state is kept (remove it by hand once the "
        "job is known to be done)"
    ]
    assert (tmp_path / "bin" / "calls.log").read_text().count("show job") == 3  # tried 3 times


@pytest.mark.parametrize("how", ["unreachable", "error", "timeout"])
def test_rank_0s_requeue_failing_leaves_a_marker_never_an_escape(tmp_path: Path, how: str) -> None:
    """At rank 0's requeue, "Unable to contact slurm controller" used to escape as SchedulerMissing (the
    job FAILED, no marker). After its retries it leaves the marker, and the batch shell requeues."""
    env = env_for(tmp_path)
    bin_dir = wrapper(tmp_path, fail=3, how=how, only=("requeue",))
    outcome = requeue_this_job(
        "preemption", JobContext.from_environ(env), str(tmp_path / "state"), client=client(bin_dir), retry=NO_WAIT
    )
    assert outcome.action == "batch-shell", outcome.message
    marker = tmp_path / "state" / contract.requeue_marker_name("77")
    assert marker.read_text() == "preemption\n"
    # Slurm is back when the step ends: the batch shell takes the marker and requeues; nothing is lost.
    state = state_file(tmp_path)
    said: list[str] = []
    assert batch.end(0, JobContext.from_environ(env), said.append, client(bin_dir), NO_WAIT) == 0
    assert job_of(bin_dir)["restarts"] == 1 and state.exists() and not marker.exists(), said
    assert run_end(tmp_path)["ended"] == "requeued"


def test_a_controller_back_after_two_failures_takes_the_requeue(tmp_path: Path) -> None:
    state = state_file(tmp_path)
    (tmp_path / "state" / contract.requeue_marker_name("77")).write_text("time-limit\n")
    bin_dir = wrapper(tmp_path, fail=2, how="unreachable", only=("requeue",))
    pauses: list[float] = []
    assert (
        batch.end(
            0,
            JobContext.from_environ(env_for(tmp_path)),
            lambda line: None,
            client(bin_dir),
            Retry(sleep=pauses.append),
        )
        == 0
    )
    assert job_of(bin_dir)["restarts"] == 1 and state.exists() and pauses == [1.0, 3.0]


def test_a_requeue_that_never_goes_through_keeps_the_state_and_does_not_complete(tmp_path: Path) -> None:
    """The worst case: rank 0's requeue and the batch shell's both fail. The job used to "complete" after 72
    of 300 steps with its state deleted; now it keeps the state, says how to resume and exits 75 (not COMPLETED)."""
    state = state_file(tmp_path)
    logs = str(tmp_path / "logs")
    run_history.append(logs, "rank0", run_history.STOP, 1, 1.0, cause="preemption")
    (tmp_path / "state" / contract.requeue_marker_name("77")).write_text("preemption\n")
    bin_dir = wrapper(tmp_path, fail=99, how="unreachable", only=("requeue",), preempt="2026-11-23T10:00:00")
    said: list[str] = []
    assert (
        batch.end(0, JobContext.from_environ(env_for(tmp_path)), said.append, client(bin_dir), NO_WAIT)
        == exit_codes.EXIT_REQUEUE_BUDGET
    )
    assert state.exists()
    assert said[-1] == (
        "job 77 was not requeued (Slurm did not take the requeue): its resume state is kept; slurmgen resume 77 "
        "brings it back from there"
    )
    assert run_end(tmp_path)["ended"] == "stopped"


def test_a_timed_out_requeue_that_took_effect_is_not_made_twice(tmp_path: Path) -> None:
    """The requeue's reply is lost but slurmctld acted: the retry finds the job pending, which is our requeue."""
    from slurmgen.requeue import _scontrol_requeue

    bin_dir = wrapper(tmp_path, fail=0, how="timeout", only=(), after="PENDING")
    # The first try takes effect and then "times out" (the wrapper requeues, then the client gives up).
    calls: list[list[str]] = []

    def flaky(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        result = run_command(argv, env, timeout)
        if len(calls) == 1:
            raise subprocess.TimeoutExpired(list(argv), timeout)
        return result

    asker = SlurmClient(flaky, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, timeout=5.0)
    outcome = _scontrol_requeue("77", "preemption", incomplete=True, client=asker, retry=NO_WAIT)
    assert outcome.action == "requeued" and job_of(bin_dir)["restarts"] == 1
    assert len(calls) == 2  # the retry met "Job is pending execution": our own requeue, not someone else's


# --- a preemption signal during a finished program's teardown ---------------------------------------------------------

# A program that takes part in preemption, finishes its work and exits. Its teardown is slow, as torch's is (a
# second or more): a module global's finalizer runs after CPython has given every signal with a Python handler
# its default action back (Py_FinalizeEx: _PySignal_Fini before the modules are torn down). torch itself is kept
# out (it would cost seconds per trial and is not what is tested: the signal's disposition is).
FINISHING = r"""
import sys, time
sys.modules["torch"] = None
from slurmgen.runtime import Preemption
pre = Preemption()
for step in range(3):
    if pre.should_stop():
        pre.save_and_exit({"step": step})
print("WORK DONE", flush=True)
class SlowTeardown:
    def __del__(self):
        time.sleep(0.4)
slow = SlowTeardown()
"""
TRIALS = 20


def teardown_trial(where: Path, delay: float) -> int:
    """One task (the real entry point and supervisor, handler runtime) that finishes; USR1 to every process of the
    task (as slurmstepd sends it) ``delay`` s after its last line. The task's exit status."""
    where.mkdir()
    env = base_env(
        SLURM_PROCID="0",
        SLURM_NTASKS="1",
        SLURM_JOB_NODELIST="localhost",
        MASTER_PORT="29999",
        **env_for(where),
        **{contract.PREEMPT_HANDLER: "runtime", contract.STEP_PID: str(os.getpid())},
    )
    command = [sys.executable, "-m", "slurmgen.task", "--", sys.executable, "-c", FINISHING]
    rank_log = Path(env[contract.LOG_DIR]) / contract.rank_log_name(0)
    rank_log.parent.mkdir(parents=True, exist_ok=True)  # the program writes its own log there, as in a job
    proc = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while not (rank_log.exists() and "WORK DONE\n" in rank_log.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "the program never finished its work"
            time.sleep(0.005)
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):  # it was done already
            os.killpg(proc.pid, signal.SIGUSR1)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_signal_during_teardown_never_fails_a_finished_job(tmp_path: Path) -> None:
    """20 trials, the signal at a random moment of the teardown (0 to 0.45 s after the last line): each task exits
    0, and the batch shell, which sees Slurm preempting the job, ends each job COMPLETED with no useless requeue
    (rank 0's record says the program finished). Before: killed by SIGUSR1 (exit 138), the job FAILED."""
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(18)  # noqa: S311 (timings, not secrets)
    delays = [rng.uniform(0.0, 0.45) for _ in range(TRIALS)]
    with ThreadPoolExecutor(max_workers=5) as pool:
        codes = list(pool.map(lambda i: teardown_trial(tmp_path / f"t{i}", delays[i]), range(TRIALS)))
    assert codes == [0] * TRIALS, list(zip(codes, [round(d, 2) for d in delays], strict=True))
    completed = 0
    for i in range(TRIALS):
        where = tmp_path / f"t{i}"
        state = state_file(where)
        bin_dir = wrapper(where, fail=0, how="error", only=(), preempt="2026-11-23T10:00:00")
        env = env_for(where) | {contract.SIGNALS: "USR1@1.0", contract.PREEMPT_HANDLER: "runtime"}
        code = batch.end(codes[i], JobContext.from_environ(env), lambda line: None, client(bin_dir), NO_WAIT)
        ended = run_end(where)
        if (code, ended["ended"], job_of(bin_dir)["restarts"], state.exists()) == (0, "completed", 0, False):
            completed += 1
    assert completed == TRIALS


# --- a clean stop is not completion -----------------------------------------------------------------------------------


@pytest.mark.parametrize("preemption", ["on", "off"])
def test_a_clean_stop_keeps_the_state_and_says_how_to_resume(tmp_path: Path, preemption: str) -> None:
    """`slurmgen cancel --signal USR2` at step 210 of 600 (preemption on), or the user's own `sbatch: {signal:}`
    with `preemption: false`: rank 0 records its stop (clean-exit), every rank exits 0. The job used to count as
    completed and lose its state; now it keeps it and its run-end says "stopped"."""
    logs = str(tmp_path / "logs")
    run_history.append(logs, "rank0", run_history.HANDLER, 1, 1.0, handler="runtime")
    run_history.append(logs, "rank0", run_history.STOP, 1, 2.0, cause="clean-exit", actions="exit without saving")
    state = state_file(tmp_path)
    env = env_for(tmp_path) | {contract.SIGNALS: "USR2@2.0"}
    if preemption == "off":
        del env[contract.PREEMPT_SIGNAL]
    bin_dir = wrapper(tmp_path, fail=0, how="error", only=())
    said: list[str] = []
    assert batch.end(0, JobContext.from_environ(env), said.append, client(bin_dir), NO_WAIT) == 0
    assert state.exists() and job_of(bin_dir)["restarts"] == 0
    assert said == [
        "job 77 stopped before its work was done (clean-exit): its resume state is kept; slurmgen resume 77 brings "
        "it back from there"
    ]
    assert run_end(tmp_path)["ended"] == "stopped"


def test_history_tells_a_stopped_run_from_a_completed_one(tmp_path: Path) -> None:
    from slurmgen.queries.history import rows

    logs = str(tmp_path / "logs")
    run_history.append(logs, "batch-shell", run_history.RUN_END, 1, 5.0, exit_code=0, ended="stopped")
    run_history.append(logs, "batch-shell", run_history.RUN_END, 2, 9.0, exit_code=0, ended="completed")
    notes = [row[-1] for row in rows(run_history.read(logs), now=10.0)]
    assert notes == ["stopped before its work was done: state kept (slurmgen resume)", ""]
