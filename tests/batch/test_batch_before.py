"""`python3 -m slurmgen.batch before ATTEMPT`: the rendered script asks it, when a signal reached the batch shell
before a start of the step, whether to start it, go to the run's end or leave with a code; the answer is the
interruption policy's (tests/test_interruption_signal.py has the table). Here the real entry point, as the
script runs it: a fresh interpreter, the signals in SLURMGEN_SIGNALS, the answer on stdout."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from recorded import REPO

from slurmgen import contract


def ask(attempt: int, signals: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SLURMGEN_"))}
    env |= {"SLURM_JOB_ID": "77", contract.SIGNALS: signals}
    return subprocess.run(
        [sys.executable, "-m", contract.BATCH_ENTRY, "before", str(attempt)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("attempt", "signals", "answer", "said"),
    [
        (0, "TERM@1.5", "exit 143", "terminated before the step started"),
        (0, "USR2@1.5", "exit 0", "asked for a clean exit before the step started"),
        (0, "USR1@1.5", "start", None),
        (1, "USR1@1.5 USR2@2.0", "end", "not started again"),
    ],
)
def test_the_script_is_told_what_to_do_with_the_signals_it_holds(
    attempt: int, signals: str, answer: str, said: str | None
) -> None:
    done = ask(attempt, signals)
    assert (done.returncode, done.stdout.strip()) == (0, answer), done.stderr
    assert (said is None and done.stderr == "") or (said is not None and said in done.stderr), done.stderr


def before_block() -> str:
    """The rendered script's own lines that ask at a start of the step (from a golden script, which
    tests/script/test_render.py pins to the template), with this interpreter for `python3`."""
    text = (REPO / "tests" / "script" / "golden" / "cpu-debug.sh").read_text()
    start = text.index('if [ -n "${_sg_signals}" ]; then')
    block = text[start : text.index("\nfi\n", start) + 4]
    return block.replace("'python3'", shlex.quote(sys.executable))


@pytest.mark.parametrize(
    ("attempt", "signals", "code", "where"),
    [
        (0, "TERM", 143, "left"),  # nothing ran: the shell leaves with SIGTERM's code
        (0, "USR2", 0, "left"),
        (0, "USR1", 0, "started"),  # the preemption signal: delivered once the step runs
        (1, "USR2", 0, "at the end"),  # a run to end: the end records, requeues or keeps the state
    ],
)
def test_the_rendered_script_carries_out_the_answer(attempt: int, signals: str, code: int, where: str) -> None:
    """Real bash, running the rendered lines inside the script's loop: it starts the step, leaves the loop for
    the run's end, or exits with the code, as the helper said."""
    script = (
        f'_sg_attempt={attempt}; _sg_signals=" {signals}"; _sg_signal_log=" {signals}@1.0"\n'
        f"while :; do\n{before_block()}echo started; exit 0\ndone\necho 'at the end'\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SLURMGEN_"))} | {"SLURM_JOB_ID": "77"}
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    said = done.stdout.strip() or "left"
    assert (done.returncode, said) == (code, where), done.stderr
