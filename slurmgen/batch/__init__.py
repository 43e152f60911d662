"""The batch shell's helper: ``python3 -m slurmgen.batch begin | before N | signal SIG [PID] | restart RC N | end RC``.

Runs in the batch shell, outside any container, once at the start of a run, before a start of the step when a
signal came first, in the background for every signal the shell receives, and after every step (commands.py;
signals.py, restart.py and task_failure.py their parts). It gathers the facts (budgets, Slurm's view of the job,
the run history), asks the interruption policy (slurmgen.interruption.decide) and carries out its answer.

Import-cost rule: standard library and slurmgen's own stdlib-only modules (contract, exit_codes, run_history,
interruption, requeue, job_context/, slurm/) only; never torch, typer, jinja2 or yaml. It runs between a signal and
Slurm's SIGKILL, where every 100 ms counts. tests/batch/test_batch_import.py checks this in a fresh interpreter. Imports
point down only: it may use the user library's checkpoint file names (slurmgen.runtime.checkpoint.layout, to
remove a completed job's resume state), nothing else of slurmgen.runtime and nothing of slurmgen.task
(tests/test_layers.py).
"""

from slurmgen.python_floor import refuse_older as _refuse_older

_refuse_older("the batch shell's helper (slurmgen.batch)")
