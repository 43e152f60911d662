"""A rehearsal that never fired says so (`slurmgen run --preempt-after/--kill-rank/--hang-rank/--bad-node`): a job
that ended 0 before its rehearsal exits EXIT_REHEARSAL_MISSED with a line naming the option, what happened
instead and the fix, while its COMPLETED line keeps the program's own exit code (a program resumed from its own
snapshot.pt once finished before --preempt-after and printed plain success). Real local runs of a short program.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from runtime.runtime_helpers import without_steering

from slurmgen.exit_codes import EXIT_REHEARSAL_MISSED
from slurmgen.local import rehearse

PY = sys.executable


def spec(where: Path, extra: str = "") -> str:
    port = 20000 + zlib.crc32(str(where).encode()) % 9000  # other local jobs on the machine take the default
    return (f"name: job\ncommand: [{PY}, -c, {json.dumps('print(42)')}]\ntime: '00:10:00'\nnodes: 1\n"
            f"tasks_per_node: 1\npython: {PY}\ndistributed: {{port: {port}}}\npreemption: {{lead_time: 120}}\n"
            f"{extra}")  # fmt: skip


def run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "slurmgen", "run", "job.yaml", *args], cwd=where, env=without_steering(),
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "extra", "line"),
    [
        (["--preempt-after", "60"], "", "--preempt-after 60 never fired: the job completed after "),
        (["--kill-rank", "0", "--after", "60"], "", "--kill-rank 0 --after 60 never fired: the job completed after "),
        (["--hang-rank", "0", "--after", "60"], "", "--hang-rank 0 --after 60 never fired: the job completed after "),
        # The job ends in its setup (a failing line ends it: setup_fail_fast), before the step's node check: the bad
        # node is never checked, and the job's own failure is its exit code.
        (["--bad-node", "2"], "nodes: 2\nsetup: ['false']\nrecovery: {health_check: 'true'}\n",
         "--bad-node 2 never fired: the job failed after "),
    ],
    ids=["preempt-after", "kill-rank", "hang-rank", "bad-node"],
)  # fmt: skip
def test_a_rehearsal_that_never_fired_says_so_and_exits_non_zero(
    tmp_path: Path, args: list[str], extra: str, line: str
) -> None:
    text = spec(tmp_path, extra)
    if "nodes: 2" in extra:
        text = text.replace("nodes: 1\n", "")
    (tmp_path / "job.yaml").write_text(text)
    done = run(tmp_path, *args)
    failed = "setup:" in extra
    # a missed rehearsal of a job that completed exits EXIT_REHEARSAL_MISSED; one that failed keeps its own code
    assert done.returncode == (1 if failed else EXIT_REHEARSAL_MISSED), done.stderr
    outcome = "FAILED, exit code 1" if failed else "COMPLETED, exit code 0"
    assert f"{outcome}, 1 run in" in done.stderr, done.stderr  # the program's own code stays visible
    (said,) = [x for x in done.stderr.splitlines() if "never fired" in x]
    assert line in said and "nothing was rehearsed" in said, said
    assert done.stderr.index(said) > done.stderr.index(outcome)  # said last, after the outcome
    if failed:
        assert "without checking its nodes" in said and "setup: lines" in said, said


def test_what_a_missed_rehearsal_says() -> None:
    asked = ("--preempt-after 30", "preempt")
    cases = {
        (asked, rehearse.DONE, "COMPLETED"): [],
        (asked, rehearse.NOT_REACHED, "COMPLETED"): [
            "--preempt-after 30 never fired: the job completed after 14.0 s, before it; nothing was rehearsed; use a "
            "smaller value (a program that resumes from its own checkpoint, e.g. snapshot.pt, finishes sooner: "
            "remove it)"
        ],
        (("--kill-rank 1 --after 5", "kill"), rehearse.NOBODY, "FAILED"): [
            "--kill-rank 1 --after 5 never fired: no program of rank 1 was running then; nothing was rehearsed; "
            "give an --after at which the program runs (after its start-up), or see the batch log"
        ],
        (("--hang-rank 0 --after 90", "hang"), rehearse.NOT_REACHED, "TIMEOUT"): [
            "--hang-rank 0 --after 90 never fired: the job hit its time limit after 14.0 s, before it; nothing was "
            "rehearsed; use a smaller value"
        ],
        (("--bad-node 2", "bad-node"), rehearse.NOT_REACHED, "FAILED"): [
            "--bad-node 2 never fired: the job failed after 14.0 s without checking its nodes; nothing was "
            "rehearsed; check that the job reaches its step (its setup: lines), or see the batch log"
        ],
    }
    for (given, outcome, state), expected in cases.items():
        rank = 1 if "kill" in given[0] else 0
        assert rehearse.missed_lines(given, outcome, state, 14.0, rank) == expected, given
