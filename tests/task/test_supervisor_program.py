"""handler: program with real processes: a program that installs its handler only where none is set (Lightning's
check) still gets the preemption signal, early or late; a program that never installs one ends cleanly; a site's
own sitecustomize still runs; a non-Python program keeps the ignore-and-send-again path; a signal that comes
between the supervisor's drain and its fork reaches the program."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runtime.runtime_helpers import base_env

from slurmgen import contract
from slurmgen.task import python_hook

from .test_supervisor import finish, rank_log, start, wait_log

# What Lightning's SignalConnector does (lightning/pytorch/trainer/connectors/signal_connector.py,
# _has_already_handler): a handler only where getsignal says SIG_DFL or None.
POLITE_HANDLER = """
import signal, sys, time
print("started", flush=True)
time.sleep(float(sys.argv[1]))
print("getsignal is SIG_DFL:", signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL, flush=True)
if signal.getsignal(signal.SIGUSR1) in (None, signal.SIG_DFL):
    signal.signal(signal.SIGUSR1, lambda s, f: print("USR1 handled", flush=True))
    print("handler installed", flush=True)
time.sleep(float(sys.argv[2]))
print("done", flush=True)
"""


@pytest.mark.parametrize("when", ["early", "late"])
def test_a_program_that_installs_its_handler_only_where_none_is_set_gets_the_signal(tmp_path: Path, when: str) -> None:
    """Under SIG_IGN it saw a handler, installed none, and never handled the signal (issue: Lightning)."""
    proc = start(tmp_path, POLITE_HANDLER, "1.5", "2")
    wait_log(tmp_path, "started" if when == "early" else "handler installed", proc)
    os.killpg(proc.pid, signal.SIGUSR1)  # as slurmstepd: every process of the task
    assert finish(proc) == 0, rank_log(tmp_path)
    text = rank_log(tmp_path)
    assert "getsignal is SIG_DFL: True" in text
    assert text.count("USR1 handled") == 1 and "done" in text, text
    if when == "early":
        assert text.index("came before the program installed a handler") < text.index("USR1 handled")
        # the kernel delivered the pending one when the hook unblocked it: the supervisor did not send it again
        assert (
            "slurmgen: SIGUSR1 sent to the program, whose handler is now installed (it waited there, blocked)" in text
        )


@pytest.mark.slow  # importing lightning takes seconds
def test_lightnings_own_check_installs_its_handler(tmp_path: Path) -> None:
    """Lightning's own code decides, not a copy of it: its SignalConnector's check and its registration."""
    pytest.importorskip("lightning")
    code = (
        "import signal, time\n"
        "from lightning.pytorch.trainer.connectors.signal_connector import _SignalConnector as C\n"
        "print('has handler', C._has_already_handler(signal.SIGUSR1), flush=True)\n"
        "C._register_signal(signal.SIGUSR1, lambda s, f: print('Lightning handler ran', flush=True))\n"
        "time.sleep(1)\n"
    )
    proc = start(tmp_path, code)
    wait_log(tmp_path, "has handler", proc, timeout=120)
    assert finish(proc) == 0, rank_log(tmp_path)
    assert "has handler False" in rank_log(tmp_path)


def test_a_python_program_that_never_installs_a_handler_ends_cleanly(tmp_path: Path) -> None:
    code = "import time; print('started', flush=True); time.sleep(1.5); print('done', flush=True)"
    proc = start(tmp_path, code)
    wait_log(tmp_path, "started", proc)
    os.killpg(proc.pid, signal.SIGUSR1)  # blocked in the program: pending, never its default action
    assert finish(proc) == 0, rank_log(tmp_path)
    text = rank_log(tmp_path)
    assert "done" in text
    assert "slurmgen: the program ended before installing a handler for SIGUSR1" in text


def test_a_sites_own_sitecustomize_still_runs_and_the_hook_leaves_no_trace(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('site customized', flush=True)\n")
    code = (
        "import os, sys, signal\n"
        "print('PYTHONPATH', os.environ.get('PYTHONPATH'), flush=True)\n"
        f"print('hook var', os.environ.get({contract.UNBLOCK_ON_HANDLER!r}), flush=True)\n"
        f"print('hook on path', {python_hook.HOOK_DIR!r} in sys.path, flush=True)\n"
    )
    proc = start(tmp_path, code, PYTHONPATH=str(site))
    assert finish(proc) == 0, rank_log(tmp_path)
    lines = rank_log(tmp_path).splitlines()
    assert lines == ["site customized", f"PYTHONPATH {site}", "hook var None", "hook on path False"]


def test_a_non_python_program_keeps_the_ignore_and_send_again_path(tmp_path: Path) -> None:
    """perl installs its handler whatever the action it started with (a shell would not: POSIX shells cannot trap
    a signal ignored on entry)."""
    perl = shutil.which("perl")
    if perl is None:
        pytest.skip("needs perl")
    script = tmp_path / "handles.pl"
    script.write_text(
        "#!" + perl + '\n$| = 1; print "started\\n"; select(undef, undef, undef, 1.5);\n'
        '$SIG{USR1} = sub { print "USR1 handled\\n" }; print "handlers installed\\n";\n'
        'select(undef, undef, undef, 0.3) for 1..5; print "done\\n";\n'
    )
    script.chmod(0o755)
    env = base_env(
        SLURM_JOB_ID="7", SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_JOB_NODELIST="localhost", MASTER_PORT="29999",
        **{contract.LOG_DIR: str(tmp_path), contract.PREEMPT_SIGNAL: "USR1", contract.PREEMPT_HANDLER: "program"},
    )  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "slurmgen.task", "--", str(script)], env=env, start_new_session=True)
    wait_log(tmp_path, "started", proc)
    os.killpg(proc.pid, signal.SIGUSR1)
    assert finish(proc) == 0, rank_log(tmp_path)
    text = rank_log(tmp_path)
    assert text.count("USR1 handled") == 1, text
    assert "slurmgen: SIGUSR1 sent to the program, whose handler is now installed" in text


def test_which_programs_get_the_start_up_hook(tmp_path: Path) -> None:
    py = sys.executable
    assert python_hook.hooks_python(py, [py, "train.py"])
    assert python_hook.hooks_python(py, [py, "-u", "-W", "ignore", "-m", "pkg", "-E"])  # -E is pkg's argument
    assert python_hook.hooks_python(py, [py, "-Wdefault", "-c", "pass"])
    for flags in (["-E"], ["-I"], ["-S"], ["-uE"], ["-X", "dev", "-s", "-S"]):
        assert not python_hook.hooks_python(py, [py, *flags, "train.py"]), flags
    for line, hooked in [
        ("#!/usr/bin/env python3\n", True),
        ("#!/usr/bin/env -S python3 -u\n", True),
        (f"#!{py} -E\n", False),
        ("#!/bin/bash\n", False),
    ]:
        script = tmp_path / "tool"
        script.write_text(line + "print('x')\n")
        assert python_hook.hooks_python(str(script), [str(script)]) == hooked, line
    assert not python_hook.hooks_python("/bin/sh", ["/bin/sh", "-c", "python train.py"])


SLOW_FORK = """
import os, sys, time
real_fork = os.fork
def slow_fork():
    sys.stderr.write("forking\\n")
    sys.stderr.flush()
    time.sleep(1.0)  # the window between the supervisor's drain of early signals and its fork, made wide
    return real_fork()
os.fork = slow_fork
from slurmgen.task import launch
sys.exit(launch.main(sys.argv[1:]))
"""

UNBLOCKS = """
import signal, time
signal.signal(signal.SIGUSR1, lambda s, f: print("USR1 handled", flush=True))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # as slurmgen's Preemption does
time.sleep(1)
print("done", flush=True)
"""


def test_a_signal_between_the_drain_and_the_fork_reaches_the_program(tmp_path: Path) -> None:
    """Pending in the supervisor, not in the child (fork(2)); from slurmstepd, so the supervisor used to take it
    for one the program had too, and the program never got it."""
    env = base_env(
        SLURM_JOB_ID="7", SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_JOB_NODELIST="localhost", MASTER_PORT="29999",
        **{contract.LOG_DIR: str(tmp_path), contract.PREEMPT_SIGNAL: "USR1", contract.PREEMPT_HANDLER: "runtime"},
    )  # fmt: skip
    command = [sys.executable, "-c", SLOW_FORK, "--", sys.executable, "-c", UNBLOCKS]
    proc = subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    assert proc.stderr.readline() == b"forking\n"
    os.killpg(proc.pid, signal.SIGUSR1)  # as slurmstepd; only the supervisor exists yet
    assert finish(proc) == 0, rank_log(tmp_path)
    assert rank_log(tmp_path).splitlines() == ["USR1 handled", "done"]


def test_an_uncaught_exception_is_in_the_run_history_while_its_program_still_lingers(tmp_path: Path) -> None:
    """The supervisor records the program's raise when the start-up hook writes it, not only at the exit: here the
    program lingers 30 s in an atexit hook, and its task is killed meanwhile (as a step's end kills what is left of
    a torchrun worker that outlasted its agent). The raise is recorded all the same, and the rank that raised is
    the cause, not the peer that lost it and whose exit was recorded first."""
    import time

    from slurmgen import run_history
    from slurmgen.interruption.casualty import first_failure

    code = (
        "import atexit, time\natexit.register(time.sleep, 30)\nprint('started', flush=True)\nraise ValueError('bad')\n"
    )
    proc = start(tmp_path, code)
    wait_log(tmp_path, "started", proc)
    deadline = time.monotonic() + 10
    while not [e for e in run_history.read(str(tmp_path)) if e.get("event") == run_history.RAISED]:
        assert proc.poll() is None and time.monotonic() < deadline, rank_log(tmp_path)
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    [raised] = [e for e in run_history.read(str(tmp_path)) if e.get("event") == run_history.RAISED]
    assert (raised["rank"], raised["raised"]) == (1, "ValueError: bad") and raised["time"] - raised["raised_at"] < 2
    assert not [e for e in run_history.read(str(tmp_path)) if e.get("event") == run_history.TASK_EXIT]
    # the peer's own raise ("Connection closed by peer") came after it, and its exit was recorded first
    peer = {"event": run_history.TASK_EXIT, "run": raised["run"], "rank": 0, "node": "node8", "exit_code": 1,
            "time": raised["time"] - 0.1, "raised": "RuntimeError: Connection closed by peer",
            "raised_at": raised["raised_at"] + 0.01}  # fmt: skip
    cause = first_failure([peer, raised], raised["run"])
    assert cause is not None and (cause.rank, cause.exit_code, cause.raised) == (1, 1, "ValueError: bad")
