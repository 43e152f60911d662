"""`python -m slurmgen.batch setup-failed RC ITEM TEXT`: the run's end of a setup item that failed before the step,
as history and status read it. The whole run (the batch shell's one line, teardown): tests/local/test_local_setup.py."""

from __future__ import annotations

import os
from pathlib import Path

from batch.test_batch import env_for, history
from slurmgen.batch.commands import main


def test_a_failed_setup_item_is_a_failed_run_with_the_items_code_and_name(tmp_path: Path) -> None:
    os.makedirs(tmp_path / "logs")
    env = env_for(tmp_path)
    assert main(["setup-failed", "127", "1", "module load cuda/12.4"], env) == 127
    (run,) = history(tmp_path)
    assert (run.exit_code, run.ended, run.requeued_by) == (127, "failed", None)
    assert run.failing == "setup[1] `module load cuda/12.4` (exit 127)"


def test_control_characters_of_the_item_are_escaped_in_the_record(tmp_path: Path) -> None:
    os.makedirs(tmp_path / "logs")
    assert main(["setup-failed", "1", "0", "echo \x1b[31mred"], env_for(tmp_path)) == 1
    (run,) = history(tmp_path)
    assert run.failing is not None and "\x1b" not in run.failing and run.failing.startswith("setup[0] `echo ")
