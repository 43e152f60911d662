"""The Python floors: the batch shell's helper and the task supervisor on real 3.9 and 3.10 interpreters, and one
line below the floor (which Python, from where, the fix), with the run's start recorded."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from runtime.test_runtime_import import find_python

from slurmgen import python_floor, run_history

ROOT = Path(__file__).resolve().parent.parent

# Every module of the two in-job packages and what they import, imported in a fresh interpreter; then the
# checkpoint layout the helper reads (its one module of slurmgen.runtime).
IMPORT_ALL = """
import pkgutil, slurmgen.batch, slurmgen.task
names = []
for package in (slurmgen.batch, slurmgen.task):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not info.name.endswith("__main__") and info.name != "slurmgen.task.torchrun_agent":
            __import__(info.name)
            names.append(info.name)
import slurmgen.runtime.checkpoint.layout
import slurmgen.variables  # loaded by a task only when it expands a per-task ${NAME}
print(len(names))
"""


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "PYTHON"))}
    return {**out, "PYTHONPATH": str(ROOT)}


def python_or_skip(version: str) -> str:
    found = find_python(version)
    if found is None:
        pytest.skip(f"no working python{version} here")
    return found


def run(python: str, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-B", *args], cwd=ROOT, env={**env(), **(extra or {})}, capture_output=True, text=True, timeout=120
    )


def test_the_line_says_which_python_where_from_and_the_fix() -> None:
    host = python_floor.refusal("the batch shell's helper (slurmgen.batch)", (3, 9), "3.8.18", "/opt/py38", False)
    assert host == (
        "slurmgen: the batch shell's helper (slurmgen.batch) needs Python 3.9 or newer, and the spec field python "
        "runs 3.8.18 (/opt/py38): set python to a Python 3.9 or newer (python: /path/to/python3)"
    )
    image = python_floor.refusal("the task supervisor (slurmgen.task)", (3, 9), "3.6.8", "/usr/bin/python3", True)
    assert "the image's python (spec field container.python, else python) is 3.6.8 (/usr/bin/python3)" in image
    assert image.endswith("use an image with Python 3.9 or newer, or set container.python to one inside it")
    assert (python_floor.IN_JOB, python_floor.RUNTIME) == ((3, 9), (3, 10))


@pytest.mark.parametrize("version", ["3.9", "3.10"])
def test_every_in_job_module_imports_on_the_floor_and_above(version: str) -> None:
    done = run(python_or_skip(version), "-c", IMPORT_ALL)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 20, done.stdout


def test_the_policy_vocabulary_is_its_strings_on_3_9() -> None:
    """enum.StrEnum is 3.11's: the run history, the messages and the shell read the same strings on 3.9."""
    code = (
        "import json; from slurmgen.interruption.states import Ended, Phase\n"
        "print(str(Ended.COMPLETED), f'{Phase.RUNNING}', '%s' % Ended.REQUEUED, json.dumps([Ended.COMPLETED]))"
    )
    done = run(python_or_skip("3.9"), "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["completed", "running", "requeued", '["completed"]']


def test_handler_program_gets_the_signal_number_on_3_10() -> None:
    """str() of an IntEnum member is 'Signals.SIGUSR1' before 3.11: the hook must get the number."""
    code = (
        "import signal; from slurmgen.task.python_hook import hook_env\n"
        "print(hook_env({}, signal.SIGUSR1)['SLURMGEN_UNBLOCK_ON_HANDLER'])"
    )
    done = run(python_or_skip("3.10"), "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(int(__import__("signal").SIGUSR1))


def test_the_runtime_imports_on_3_10() -> None:
    done = run(python_or_skip("3.10"), "-c", "from slurmgen.runtime import Preemption; print(Preemption.__name__)")
    assert (done.returncode, done.stdout.strip()) == (0, "Preemption"), done.stderr


def test_below_the_floor_one_line_and_the_start_is_recorded(tmp_path: Path) -> None:
    old = python_or_skip("3.8")
    extra = {"SLURMGEN_LOG_DIR": str(tmp_path), "SLURM_JOB_NODELIST": "n1", "SLURM_JOB_PARTITION": "p"}
    begun = run(old, "-m", "slurmgen.batch", "begin", extra=extra)
    assert begun.returncode == python_floor.REFUSED
    assert begun.stderr.splitlines() == [
        f"slurmgen: the batch shell's helper (slurmgen.batch) needs Python 3.9 or newer, and the spec field python "
        f"runs 3.8.{begun.stderr.split('runs 3.8.')[1].split()[0]} ({old}): set python to a Python 3.9 or newer "
        f"(python: /path/to/python3)"
    ]
    events = run_history.read(str(tmp_path))
    assert [(e["event"], e["run"], e["by"]) for e in events] == [(run_history.RUN_START, 1, "batch-shell")]
    assert events[0]["refused"] == begun.stderr.strip()
    assert [r.run for r in run_history.runs(events)] == [1]
    launched = run(old, "-m", "slurmgen.task", "--", "true", extra={"SLURMGEN_CONTAINER": "1"})
    assert launched.returncode == python_floor.REFUSED
    assert (
        len(launched.stderr.splitlines()) == 1 and "the image's python (spec field container.python" in launched.stderr
    )
    imported = run(old, "-c", "import slurmgen.task")
    assert imported.returncode == 1 and imported.stderr.splitlines()[-1].startswith(
        "ImportError: the task supervisor (slurmgen.task) needs Python 3.9 or newer"
    )
    assert json.loads((tmp_path / "history" / "batch-shell.jsonl").read_text())["refused"] == events[0]["refused"]
