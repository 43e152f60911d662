"""Every exit code slurmgen gives a process on purpose, in one place, with why it is that number.

A job's exit code is what Slurm records (sacct's ExitCode), what `submit --wait` returns and what the batch shell
ends with, so one number must mean one thing across the CLI, the batch shell, the tasks and local runs. Codes a
program chose itself pass through untouched; these are only slurmgen's own.

Standard library only, and no import at all: every process (the batch shell's helper, each task, the user's
program) imports it.
"""

from __future__ import annotations

# --- The CLI and the library's errors (slurmgen/errors.py: every error knows its code) -----------------------
EXIT_FAILURE = 1  # the generic failure, as any Unix tool
EXIT_INVALID = 2  # invalid input: a spec, an override, an argument (2: usage, as argparse and the shells use it)
EXIT_SCHEDULER = 3  # the scheduler refused or failed
EXIT_NO_SCHEDULER = 4  # sbatch/scontrol not installed or not reachable

# --- A task that stops on purpose (sysexits.h meanings) ------------------------------------------------------
# Only rank 0 uses a non-zero one, and only after its save: another rank exiting non-zero first would make srun
# (--kill-on-bad-exit) kill rank 0 mid-save. The batch shell ends with EXIT_REQUEUE_BUDGET too when a requeue it
# wanted was refused over budget, so the job does not look done.
EXIT_REQUEUE_BUDGET = 75  # EX_TEMPFAIL: stopped for preemption but the requeue budget is spent
EXIT_PEER_LOST = 76  # EX_PROTOCOL: a peer died or stopped answering during the stop agreement
EXIT_TERMINATED = 143  # 128 + SIGTERM: saved and exited because Slurm asked the job to end

# --- The batch shell's node check (batch/nodes.py) -----------------------------------------------------------
# Besides 0 (start the step on the nodes it prints): the job was requeued away from a bad node; too few healthy
# nodes and no requeue (the run ends). Any other code is the check's own failure, which blames no node. Small
# numbers: the template's `case` tells them from a Python traceback's 1.
NODES_REQUEUED = 3
NODES_SHORT = 4

# --- The task's entry point (task/launch.py): the program could not be started ------------------------------
EXIT_CANNOT_EXECUTE = 126  # the shell's code for "found but not executable" (POSIX, Shell Command Language 2.8.2)
EXIT_NOT_FOUND = 127  # the shell's code for "not found"

# --- Local runs (local/runner.py) ------------------------------------------------------------------------------
EXIT_TIMEOUT = 124  # as timeout(1): a job that hit its limit never exits 0, whatever its script returned
EXIT_CANCELLED = 143  # a job ended by `slurmgen cancel`: SIGTERM's code, as a shell reports it
# The job ended 0 but a rehearsal it was asked for (--preempt-after, --kill-rank, --hang-rank, --bad-node) never
# happened: a rehearsal's point is to show the failure being handled, so a run that showed nothing must not pass as
# one that did (local/rehearse.py). The job's own code stays in the COMPLETED line, the journal and `status`.
EXIT_REHEARSAL_MISSED = 5

# --- `submit --wait` (queries/wait.py) --------------------------------------------------------------------------
# It exits with the job's own code; slurmgen's own failures (a refused spec, Slurm failing, a job Slurm forgot)
# exit with this one instead, as docker run and timeout(1) keep a code of their own (125), and the last line on
# stdout (`result_line`) tells the two apart even when the job itself exits 125.
EXIT_WAIT_ERROR = 125
