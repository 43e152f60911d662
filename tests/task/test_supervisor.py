"""The task's supervisor: its decisions on plain values, then real processes and real signals through the entry
point (this test process stands for slurmstepd: it starts the entry point, and signals every process of the task
the way proctrack does, or only the supervisor the way a parent such as torchrun's agent does)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runtime.runtime_helpers import base_env

from slurmgen import contract, run_history
from slurmgen.batch import task_failure
from slurmgen.task import supervisor
from slurmgen.task.supervisor import Routing, TaskSetup

STATUS = """Name:\tpython3
SigQ:\t0/95755
SigPnd:\t0000000000000000
ShdPnd:\t0000000000000200
SigBlk:\t0000000000000000
SigIgn:\t0000000001001000
SigCgt:\t0000000100000202
"""


def plan(handler: str = "program", stepwide: frozenset[int] = frozenset({10, 1})) -> TaskSetup:
    return TaskSetup(("prog",), signal.SIGUSR1, handler, 0, "node1", None, stepwide)


def test_the_signal_masks_of_proc_status() -> None:
    masks = supervisor.parse_status(STATUS)
    assert supervisor.has(masks["SigCgt"], signal.SIGUSR1) and supervisor.has(masks["SigCgt"], signal.SIGINT)
    assert supervisor.has(masks["ShdPnd"], signal.SIGUSR1) and not supervisor.has(masks["SigCgt"], signal.SIGTERM)
    assert supervisor.has(masks["SigIgn"], signal.SIGPIPE)


def test_the_programs_start_by_handler() -> None:
    assert supervisor.child_disposition("runtime", signal.SIGUSR1) == "block"  # Preemption unblocks it
    assert supervisor.child_disposition("auto", signal.SIGUSR1) == "block"
    assert supervisor.child_disposition("program", signal.SIGUSR1) == "ignore"  # any handler it installs works
    assert supervisor.child_disposition("requeue", signal.SIGUSR1) == "ignore"
    assert supervisor.child_disposition("", None) is None


def test_who_sent_a_signal_decides_whether_the_program_has_it() -> None:
    routing = Routing(plan("runtime"))
    never = lambda sig: False  # noqa: E731
    assert not routing.route(signal.SIGTERM, 10, 0.0, never)  # slurmstepd: every process of the step has it
    assert not routing.route(signal.SIGTERM, 1, 0.1, never)  # an ancestor of it (the local runner's group)
    assert not routing.route(signal.SIGTERM, 555, 1.0, never)  # a parent passing the same one on: not twice
    assert routing.route(signal.SIGTERM, 555, 9.0, never)  # later, from a parent only: the program needs it
    assert routing.route(signal.SIGUSR2, 555, 9.5, never)
    assert routing.stopped_on_purpose()


def test_a_preemption_signal_the_program_cannot_take_yet_is_owed() -> None:
    routing = Routing(plan("program"))
    assert not routing.route(signal.SIGUSR1, 10, 0.0, lambda sig: False)
    assert routing.owed == signal.SIGUSR1
    handled = Routing(plan("program"))
    assert not handled.route(signal.SIGUSR1, 10, 0.0, lambda sig: True) and handled.owed is None
    requeue = Routing(plan("requeue"))
    assert not requeue.route(signal.SIGUSR1, 555, 0.0, lambda sig: False) and requeue.owed is None


def test_ancestry_follows_parents_to_init() -> None:
    parents = {40: 30, 30: 1, 1: 0}
    assert supervisor.ancestry(40, parents.get) == {40, 30, 1}
    assert os.getppid() in supervisor.ancestry(os.getpid(), supervisor.proc_parent)


def test_the_first_failure_of_the_run_and_what_the_batch_log_says(tmp_path: Path) -> None:
    log = tmp_path / "rank-1.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    events = [
        {"event": "task-exit", "run": 1, "time": 5.0, "rank": 3, "node": "n2", "exit_code": 76, "log": "x"},
        {"event": "task-exit", "run": 1, "time": 4.0, "rank": 1, "node": "n1", "exit_code": 3, "log": str(log)},
        {"event": "task-exit", "run": 2, "time": 1.0, "rank": 0, "node": "n1", "exit_code": 9, "log": "x"},
    ]
    first = task_failure.first_failure(events, 1)
    assert first is not None and first.describe() == "rank 1 on n1 (exit 3)"
    last = task_failure.tail(first.log, 3)
    assert last == ["line 27", "line 28", "line 29"]
    assert task_failure.report(first, 143, last) == [
        "rank 1 on n1 failed first: its program exited with code 3; the job exits 3 (the step's 143 comes from "
        "the other tasks' stop)",
        f"its log: {log}; last lines:",
        "| line 27",
        "| line 28",
        "| line 29",
    ]
    assert task_failure.first_failure(events, 3) is None


# --- real processes ---------------------------------------------------------------------------------------------

LATE_HANDLER = """
import os, signal, sys, time
print("started", flush=True)
time.sleep(float(sys.argv[1]))
signal.signal(signal.SIGUSR1, lambda s, f: print("USR1 handled", flush=True))
signal.signal(signal.SIGTERM, lambda s, f: (print("TERM handled", flush=True), sys.exit(7)))
print("handlers installed", flush=True)
time.sleep(float(sys.argv[2]))
print("done", flush=True)
"""

SHOW_SIGNALS = (
    "import json; s = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l);"
    "print(json.dumps({k: int(s[k], 16) for k in ('SigBlk', 'SigIgn')}))"
)


def start(tmp_path: Path, code: str, *args: str, handler: str = "program", **extra: str) -> subprocess.Popen[bytes]:
    return start_python(tmp_path, (), code, args, handler, extra)


def start_python(
    tmp_path: Path, flags: tuple[str, ...], code: str, args: tuple[str, ...], handler: str, extra: dict[str, str]
) -> subprocess.Popen[bytes]:
    """The entry point running `python FLAGS -c CODE ARGS` as rank 1 of job 7."""
    env = base_env(
        SLURM_JOB_ID="7",
        SLURM_PROCID="1",
        SLURM_NTASKS="2",
        SLURM_JOB_NODELIST="localhost",
        SLURMD_NODENAME="node9",
        MASTER_PORT="29999",
        **{contract.LOG_DIR: str(tmp_path), contract.PREEMPT_SIGNAL: "USR1", contract.PREEMPT_HANDLER: handler},
        **extra,
    )
    command = [sys.executable, "-m", "slurmgen.task", "--", sys.executable, *flags, "-c", code, *args]
    return subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.PIPE)


def rank_log(tmp_path: Path) -> str:
    path = tmp_path / "rank-1.log"
    return path.read_text() if path.exists() else ""


def wait_log(tmp_path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in rank_log(tmp_path):
        assert proc.poll() is None and time.monotonic() < deadline, rank_log(tmp_path)
        time.sleep(0.02)


def finish(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_an_early_signal_reaches_a_late_handler_once_and_kills_nothing(tmp_path: Path) -> None:
    """program, a program without the start-up hook (python -E ignores PYTHONPATH, as any non-Python program
    would): USR1 sent to every process of the task (as slurmstepd) before the program has a handler: its SIG_IGN
    drops it, the supervisor sees no handler in /proc and sends it again once there is one."""
    proc = start_python(tmp_path, ("-E",), LATE_HANDLER, ("1.5", "1.5"), "program", {})
    wait_log(tmp_path, "started", proc)
    os.killpg(proc.pid, signal.SIGUSR1)
    assert finish(proc) == 0, rank_log(tmp_path)
    text = rank_log(tmp_path)
    assert text.count("USR1 handled") == 1
    assert text.index("handlers installed") < text.index("sent to the program") < text.index("USR1 handled")
    assert "slurmgen: SIGUSR1 came before the program installed a handler for it" in text


def test_a_signal_only_the_supervisor_got_is_passed_on(tmp_path: Path) -> None:
    """A parent's signal (torchrun's agent shutting its workers down) reaches only the supervisor: passed on. The
    step's manager here is another process (init), so this test process is such a parent."""
    proc = start(tmp_path, LATE_HANDLER, "0", "30", **{contract.STEP_PID: "1"})
    wait_log(tmp_path, "handlers installed", proc)
    os.kill(proc.pid, signal.SIGTERM)
    assert finish(proc) == 7  # the program's own code: it handled TERM; no failure of its own recorded
    assert rank_log(tmp_path).count("TERM handled") == 1
    assert not (tmp_path / "history").exists()


def test_the_programs_own_failure_is_recorded_and_its_code_kept(tmp_path: Path) -> None:
    proc = start(tmp_path, "import sys; print('boom', file=sys.stderr); sys.exit(3)")
    assert finish(proc) == 3
    (event,) = run_history.read(str(tmp_path))
    assert (event["event"], event["rank"], event["node"], event["exit_code"]) == ("task-exit", 1, "node9", 3)
    assert event["log"] == str(tmp_path / "rank-1.log") and rank_log(tmp_path) == "boom\n"


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL])
def test_a_program_killed_by_a_signal_ends_its_supervisor_by_the_same(tmp_path: Path, sig: signal.Signals) -> None:
    proc = start(tmp_path, f"import os; os.kill(os.getpid(), {int(sig)})")
    assert finish(proc) == -sig  # srun reports the task as killed by that signal
    (event,) = run_history.read(str(tmp_path))
    assert (event["exit_code"], event["signal"]) == (128 + sig, sig.name.removeprefix("SIG"))


def program_pid(proc: subprocess.Popen[bytes]) -> int:
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


@pytest.mark.parametrize("supervisor_too", [True, False], ids=["step-wide", "program-alone"])
def test_a_program_killed_by_the_steps_term_before_its_supervisor_got_it_is_no_failure(
    tmp_path: Path, supervisor_too: bool
) -> None:
    """slurmstepd signals the deepest process of a step first (kill_proc_tree), so on a loaded node the program can
    die of the step's SIGTERM (a requeue, scancel) and be reaped before the supervisor's own copy arrives: seen on
    Slurm 26.05 as a requeued job naming rank 0 as failed first. The supervisor waits a moment for that copy; a
    program killed by someone who signalled it alone still fails on its own."""
    proc = start(tmp_path, "import time; print('ready', flush=True); time.sleep(60)")
    wait_log(tmp_path, "ready", proc)
    os.kill(program_pid(proc), signal.SIGTERM)
    if supervisor_too:
        time.sleep(0.3)  # slurmstepd's next kill(), late on a loaded node
        os.kill(proc.pid, signal.SIGTERM)
    assert finish(proc) == -signal.SIGTERM  # the task ends by the signal its program ended by, either way
    events = run_history.read(str(tmp_path))  # none at all when nothing was recorded
    if supervisor_too:
        assert events == []  # a stop, not the program's own failure
    else:
        assert [(e["event"], e["signal"], e["exit_code"]) for e in events] == [("task-exit", "TERM", 143)]


@pytest.mark.parametrize(
    ("handler", "flags", "blocked", "ignored"),
    [
        ("runtime", (), True, False),
        ("auto", (), True, False),
        ("program", (), True, False),  # a Python program: the start-up hook unblocks it at its handler
        ("program", ("-E",), False, True),  # no hook (PYTHONPATH ignored): ignored until it has one
        ("program", ("-I",), False, True),
        ("program", ("-S",), False, True),
    ],
)
def test_the_program_starts_with_the_preemption_signal_as_its_handler_needs(
    tmp_path: Path, handler: str, flags: tuple[str, ...], blocked: bool, ignored: bool
) -> None:
    proc = start_python(tmp_path, flags, SHOW_SIGNALS, (), handler, {})
    assert finish(proc) == 0
    masks = json.loads(rank_log(tmp_path))
    usr1 = 1 << (signal.SIGUSR1 - 1)
    assert (bool(masks["SigBlk"] & usr1), bool(masks["SigIgn"] & usr1)) == (blocked, ignored)
    assert masks["SigBlk"] & ~usr1 == 0  # everything the supervisor blocked for itself is the program's again
