"""A sweep spec and `scontrol show job` output for many array tasks, built from a recorded record."""

from __future__ import annotations

import re

from recorded import recorded_text

SWEEP_SPEC = """\
name: sw
command: [python3, train.py, "--lr={{lr}}", "--seed={{seed}}"]
time: "00:05:00"
output: {output}
sweep:
  grid: {{lr: {lrs}, seed: {seeds}}}
{extra}"""


def show_job_records(array_job: int, tasks: list[tuple[int, str, int]], first_raw: int) -> str:
    """One `scontrol --oneliner show job` record per (task id, state, exit code), from a recorded running task."""
    template = recorded_text("show-job-o-array.out").splitlines()[1]
    lines = []
    for n, (task, state, code) in enumerate(tasks):
        line = re.sub(r"^JobId=\d+ ArrayJobId=\d+ ArrayTaskId=\d+", f"JobId={first_raw + n} ArrayJobId={array_job} "
                      f"ArrayTaskId={task}", template)  # fmt: skip
        line = line.replace("JobState=RUNNING", f"JobState={state}").replace("ExitCode=0:0", f"ExitCode={code}:0")
        lines.append(line)
    return "\n".join(lines) + "\n"


def pending_record(array_job: int, tasks: str) -> str:
    """The one record a pending range of tasks has, e.g. 7_[5-9%2]."""
    line = recorded_text("show-job-o-array.out").splitlines()[0]
    return re.sub(r"^JobId=\d+ ArrayJobId=\d+ ArrayTaskId=\S+", f"JobId={array_job} ArrayJobId={array_job} "
                  f"ArrayTaskId={tasks}", line) + "\n"  # fmt: skip
