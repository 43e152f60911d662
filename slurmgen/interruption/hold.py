"""How long the rendered script holds an early preemption signal after starting the step (`hold_limit`).

Its own module, with no imports: the renderer writes these numbers into every script, and rendering must not load
the rest of the policy (the run history and the decisions it reads it for).
"""

# Seconds the batch shell holds the preemption signal after starting the step: the runtime entry point blocks
# it within a fraction of a second (Python's start-up), and until then the default action would kill a task.
STEP_GRACE = 3
# An early preemption signal is held until every task of the step says it has blocked it (a file each, see
# slurmgen.task.launch.say_ready), which takes longer than STEP_GRACE where the interpreter starts slowly (a
# venv on NFS, cold caches). The hold never lasts more than this part of the lead time: the program needs the
# rest to save. At least STEP_GRACE, as before, where a task's file cannot be seen.
HOLD_SHARE = 4


def hold_limit(lead_time: int) -> int:
    """Seconds after the step's start past which an early preemption signal is delivered whatever the tasks say."""
    return max(STEP_GRACE, lead_time // HOLD_SHARE)
