"""The parse of single job variables: integers, the run number, the job key, the hang timeout.

Each fact has one parser here, so the batch shell's helper, the task supervisor and the user's program agree on what
an empty or odd value means. Standard library only (contract, errors and slurm.ids are standard-library leaves).
"""

from __future__ import annotations

from collections.abc import Mapping

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.slurm.ids import job_key_of

JOB_ID = "SLURM_JOB_ID"
ARRAY_JOB_ID = "SLURM_ARRAY_JOB_ID"
ARRAY_TASK_ID = "SLURM_ARRAY_TASK_ID"
RESTART_COUNT = "SLURM_RESTART_COUNT"


def key_from(mapping: Mapping[str, str]) -> str | None:
    """`job_key_of` over Slurm's variables in ``mapping``."""
    return job_key_of(mapping.get(JOB_ID, ""), mapping.get(ARRAY_JOB_ID, ""), mapping.get(ARRAY_TASK_ID, ""))


# The same rule in bash, for the batch script (rendered into `_sg_key`): an array task is `A_T`, else the job id.
# Slurm exports SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID together (sbatch(1), OUTPUT ENVIRONMENT VARIABLES).
KEY_SHELL = (
    f'if [ -n "${{{ARRAY_JOB_ID}:-}}" ]; then\n'
    f'    _sg_key="${{{ARRAY_JOB_ID}}}_${{{ARRAY_TASK_ID}}}"\n'
    "else\n"
    f'    _sg_key="${{{JOB_ID}:?slurmgen: not inside a Slurm job ({JOB_ID} is unset)}}"\n'
    "fi"
)


def restart_count_from(mapping: Mapping[str, str]) -> int:
    """How many times Slurm restarted this job. SLURM_RESTART_COUNT is unset (not 0) on the first run."""
    count = int_variable(mapping, RESTART_COUNT)
    if count is not None and count < 0:
        raise RuntimeSetupError(f"{RESTART_COUNT}={count} is negative")
    return count or 0


def int_variable(mapping: Mapping[str, str], name: str) -> int | None:
    """An integer environment variable; None when unset or empty; a clear error when it is not a number."""
    raw = mapping.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise RuntimeSetupError(f"{name}={raw!r} is not an integer") from None


def hang_timeout_from(mapping: Mapping[str, str]) -> int | None:
    """recovery.hang_timeout in whole seconds; None (the watchdog is off) when unset, empty, 0 or not a whole number.

    The renderer exports a whole number or nothing; an empty value is "off", the same as unset, so the progress
    marks, the NCCL flight recorder and the watchdog itself are on or off together."""
    raw = mapping.get(contract.HANG_TIMEOUT, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def whole(mapping: Mapping[str, str], name: str) -> int | None:
    """A whole number of ``name``, else None (unset, empty or not digits): for budgets and limits."""
    text = mapping.get(name, "").strip()
    return int(text) if text.isdigit() else None


def seconds(mapping: Mapping[str, str], name: str) -> float | None:
    try:
        return float(mapping[name])
    except (KeyError, ValueError):
        return None


def text(mapping: Mapping[str, str], name: str) -> str | None:
    """A variable's value stripped of blanks; None when unset or blank."""
    return mapping.get(name, "").strip() or None


def flag(mapping: Mapping[str, str], name: str) -> bool:
    return mapping.get(name) == "1"


def present(mapping: Mapping[str, str], name: str) -> bool:
    return name in mapping
