"""Which programs a step rehearsal (`slurmgen run --at-step`, `--preempt-at-step`) can be timed by: those whose step
slurmgen knows, read from the program's script. Pure: a spec and a script on disk, no run."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmgen.local.step_watch import unknown_progress
from slurmgen.spec.load import load_text

USES = {
    "Preemption": "from slurmgen.runtime import Preemption\npre = Preemption()\n",
    "Lightning's callback": "from slurmgen.integrations.lightning import SlurmgenPreemption\n",
    "transformers' callback": "from slurmgen.integrations.transformers import SlurmgenPreemption\n",
}


def spec(extra: str = "") -> object:
    return load_text(f"name: j\ncommand: [python3, train.py]\ntime: '01:00:00'\n{extra}", "job.yaml").spec


@pytest.mark.parametrize("text", list(USES.values()), ids=list(USES))
def test_a_program_that_uses_preemption_or_an_integrations_callback_can_be_timed_by_its_step(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / "train.py").write_text(text)
    assert unknown_progress(spec(), "job.yaml", tmp_path, "--at-step 5") is None  # type: ignore[arg-type]


def test_a_program_slurmgen_knows_no_step_of_is_refused_unless_the_spec_reads_its_output(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import time\nfor i in range(9):\n    print('it', i)\n    time.sleep(1)\n")
    line = unknown_progress(spec(), "job.yaml", tmp_path, "--at-step 5")  # type: ignore[arg-type]
    assert line is not None and line.startswith("--at-step 5: job.yaml: slurmgen does not know") and "progress" in line
    read = spec("progress: {pattern: '^it (\\d+)'}\n")
    assert unknown_progress(read, "job.yaml", tmp_path, "--at-step 5") is None  # type: ignore[arg-type]
