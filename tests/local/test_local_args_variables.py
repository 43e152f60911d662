"""Arguments after `--` and `${NAME}` variables on whole local runs (`slurmgen run`): the real script, the real
batch shell, the emulated srun and each task's entry point. Each program prints its argv and a few variables as one
JSON line per run to its rank's log; the tests read what every rank really got."""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path
from typing import Any

from cli_run import run_slurmgen
from runtime.runtime_helpers import base_env

PY = sys.executable
# The program: one JSON line with its arguments, run and the variables under test, then (run 1 of a job being
# preempted) a wait the preemption ends.
PROGRAM = """\
import json, os, sys, time
run = os.environ.get("SLURM_RESTART_COUNT", "0")
keys = ("OMP_NUM_THREADS", "PER_RANK", "LITERAL", "SLURM_PROCID")
print(json.dumps({"run": run, "argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in keys}}), flush=True)
if run == "0" and os.environ.get("WAIT_FOR_PREEMPTION"):
    time.sleep(120)
"""

# Arguments that a shell would take apart: spaces, both quotes, `$`, `;`, a glob, an option-like word.
HOSTILE_ARGS = ["--lr", "3e-4", "two words", "it's", 'say "hi"', "$5", "$HOME", "a;id", "*", "--set", "x=1"]


def spec(where: Path, body: str) -> str:
    port = 20000 + zlib.crc32(str(where).encode()) % 9000  # other local jobs on the machine take the default
    return (f"name: job\ntime: '00:10:00'\npython: {PY}\ndistributed: {{port: {port}}}\n"
            f"command: [{PY}, prog.py]\n{body}")  # fmt: skip


def lines(where: Path) -> list[dict[str, Any]]:
    """Every JSON line the ranks printed, in all runs."""
    found = []
    for log in sorted((where / "logs").glob("job-*/rank-*.log")):
        for line in log.read_text().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
    return found


def run(where: Path, *args: str) -> str:
    (where / "prog.py").write_text(PROGRAM)
    done = run_slurmgen("run", "job.yaml", *args, cwd=where, env=base_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_variables_reach_each_task_expanded_per_task_where_the_name_is_per_task(tmp_path: Path) -> None:
    body = (
        "tasks_per_node: 2\ncpus_per_task: 1\npreemption: false\n"
        "command: [" + PY + ", prog.py, '--rank=${SLURM_PROCID}', '--out=/x/${DATA:-none}/r${RANK}', '$${KEEP}']\n"
        "env: {OMP_NUM_THREADS: '${SLURM_CPUS_PER_TASK}', PER_RANK: 'r${SLURM_PROCID}', LITERAL: 'a$${B}c'}\n"
    )
    (tmp_path / "job.yaml").write_text(spec(tmp_path, body).replace(f"command: [{PY}, prog.py]\n", ""))
    run(tmp_path)
    got = sorted(lines(tmp_path), key=lambda line: line["env"]["SLURM_PROCID"])
    assert [line["argv"] for line in got] == [
        ["--rank=0", "--out=/x/none/r0", "${KEEP}"],
        ["--rank=1", "--out=/x/none/r1", "${KEEP}"],
    ]
    # The batch shell's value (sbatch --cpus-per-task=1 sets SLURM_CPUS_PER_TASK in the job), each task's own.
    assert [line["env"] for line in got] == [
        {"OMP_NUM_THREADS": "1", "PER_RANK": "r0", "LITERAL": "a${B}c", "SLURM_PROCID": "0"},
        {"OMP_NUM_THREADS": "1", "PER_RANK": "r1", "LITERAL": "a${B}c", "SLURM_PROCID": "1"},
    ]


def test_arguments_after_the_double_dash_reach_the_program_as_given(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(spec(tmp_path, "preemption: false\n"))
    err = run(tmp_path, "--", *HOSTILE_ARGS)
    (line,) = lines(tmp_path)
    assert line["argv"] == HOSTILE_ARGS
    assert "$HOME is not expanded" in err  # a bare $NAME stays as written, and is said
    assert not list(tmp_path.rglob("x=1"))  # `--set x=1` was the program's, not slurmgen's


def test_arguments_survive_a_requeue_and_history_shows_them(tmp_path: Path) -> None:
    body = "preemption: {handler: requeue, lead_time: 60}\nenv: {WAIT_FOR_PREEMPTION: '1'}\n"
    (tmp_path / "job.yaml").write_text(spec(tmp_path, body))
    err = run(tmp_path, "--preempt-after", "3", "--", "--lr", "3e-4", "two words", "$5")
    assert "COMPLETED, exit code 0, 2 runs in" in err, err
    got = lines(tmp_path)
    assert [line["run"] for line in got] == ["0", "1"]
    assert [line["argv"] for line in got] == [["--lr", "3e-4", "two words", "$5"]] * 2
    shown = run_slurmgen("history", "job", cwd=tmp_path, env=base_env())
    assert shown.returncode == 0, shown.stderr
    assert "args: --lr 3e-4 'two words' '$5'" in shown.stderr


def test_a_sweep_point_fills_its_placeholders_beside_the_variables(tmp_path: Path) -> None:
    """A placeholder and a variable in one word, expanded by the batch shell or (with a per-task name) by each task,
    whose copy of the point's value keeps a `$` of the value as text."""
    body = (
        "preemption: false\nsweep: {points: [{lr: 0.1, tag: 'a$b'}, {lr: 0.2, tag: x}]}\n"
        "command: [" + PY + ", prog.py, '--out=${MISSING:-d}/{lr}', '--tag={tag}-r${SLURM_PROCID}']\n"
    )
    (tmp_path / "job.yaml").write_text(spec(tmp_path, body).replace(f"command: [{PY}, prog.py]\n", ""))
    run(tmp_path, "--", "--given")
    got = sorted(line["argv"] for line in lines(tmp_path))
    assert got == [["--out=d/0.1", "--tag=a$b-r0", "--given"], ["--out=d/0.2", "--tag=x-r0", "--given"]]
