"""Lines a person reads carry words, not raw internals (a record's key=value fields, epoch
seconds, a sentence cut short, "1 workers")."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runtime.runtime_helpers import ROOT

from slurmgen.local import procs, setup
from slurmgen.local.fake_scontrol import requeue_request_text
from slurmgen.task.torchrun_agent import agent_stopped_line, shutdown_timeout


def test_a_requeue_request_reads_as_the_command_who_and_when() -> None:
    at = 1795770211
    clock = time.strftime("%H:%M:%S", time.localtime(at))
    assert requeue_request_text(f"job=2 incomplete=1 pid=9709 time={at}") == (
        f"scontrol requeue Incomplete 2, from pid 9709 at {clock}"
    )
    assert requeue_request_text("job=2_3 incomplete=0 pid=5 time=x") == "scontrol requeue 2_3, from pid 5"
    assert requeue_request_text("") == "scontrol requeue ?"


def test_the_torchrun_agents_stop_line_is_a_whole_sentence() -> None:
    line = agent_stopped_line("node3", "SIGTERM", shutdown_timeout(["--nnodes=2", "--shutdown-timeout=300", "x"]))
    assert line == (
        "slurmgen: torchrun agent on node3 stopped by SIGTERM: it passed SIGTERM on to its workers and gave them up "
        "to 300 s to end before SIGKILL"
    )
    assert shutdown_timeout(["--shutdown-timeout", "90"]) == "90" and shutdown_timeout([]) == "30"  # torchrun's


@pytest.mark.parametrize(("gpus", "word"), [("1", "1 task per node"), ("2", "2 tasks per node")])
def test_a_cpu_fallback_note_counts_in_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpus: str, word: str
) -> None:
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    (tmp_path / "train.py").write_text("")  # the example's script: a local run refuses one that is not there
    monkeypatch.chdir(tmp_path)
    loaded = setup.load("jobs/gpu-1node-8gpu.yaml", setup.Options(overrides=(f"gpus_per_node={gpus}",)), [])
    assert f"keeping {word}" in loaded.notes[0], loaded.notes


def test_the_kill_rehearsal_picks_the_program_not_a_supervisor_started_with_its_rank(tmp_path: Path) -> None:
    """Under torchrun the agent starts each worker's supervisor with RANK set; `--kill-rank` killed that supervisor,
    the program died unrecorded with it, and the restart's history note named no rank. The program is the target,
    so its supervisor records the failure with the rank (srun's launcher already worked so)."""
    from runtime.runtime_helpers import base_env

    from slurmgen.local import rehearse

    program = f"{sys.executable} -c 'import time; print(1, flush=True); time.sleep(60)'"
    root = subprocess.Popen(
        ["sh", "-c", f"RANK=2 WORLD_SIZE=4 {sys.executable} -m slurmgen.task -- {program}; :"],
        env={k: v for k, v in base_env().items() if k not in ("RANK", "WORLD_SIZE")},
        stdout=subprocess.PIPE,
    )
    try:
        assert root.stdout is not None and root.stdout.readline() == b"1\n"
        [found] = rehearse.programs_of_rank(root.pid, 2)
        assert not rehearse.is_supervisor(found)
        with open(f"/proc/{found}/cmdline", "rb") as handle:
            assert b"time.sleep(60)" in handle.read()
    finally:
        root.kill()
        for pid in procs.descendants([root.pid]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        root.wait()
