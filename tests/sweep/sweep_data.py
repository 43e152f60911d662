"""A sweep spec and `scontrol show job` output for many array tasks, built from a recorded record."""

from __future__ import annotations

SWEEP_SPEC = """\
name: sw
command: [python3, train.py, "--lr={{lr}}", "--seed={{seed}}"]
time: "00:05:00"
output: {output}
sweep:
  grid: {{lr: {lrs}, seed: {seeds}}}
{extra}"""


def squeue_rows(array_job: int, tasks: list[tuple[int, str, int]]) -> str:
    """`squeue --Format=...` rows (slurmgen.slurm.array_queue.FORMAT) for (task id, state, exit code). squeue
    prints exit_code as the raw wait status (exit code 3 is 768), as the real one does."""
    return "".join(f"{array_job}_{t}|{state}|None|0|{code << 8}|0:03|\n" for t, state, code in tasks)


def pending_row(array_job: int, tasks: str) -> str:
    """The one row a pending range of tasks has, e.g. 7_[5-9%2]."""
    return f"{array_job}_[{tasks}]|PENDING|JobArrayTaskLimit|0|0|0:00|\n"
