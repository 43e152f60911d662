"""The parse of single job variables: integers, the run number, the job key, the hang timeout.

Each fact has one parser here, so the batch shell's helper, the task supervisor and the user's program agree on what
an empty or odd value means. The contract's table (slurmgen.contract.variables()) names a parser for each variable,
and the job context's field takes the parser's return type (slurmgen.job_context.generate). A parser takes the
mapping and the variable's name, and the row's default when it has a third parameter. Standard library only
(contract, errors and slurm.ids are standard-library leaves), Python 3.9.
"""

from __future__ import annotations

from collections.abc import Mapping

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.slurm.ids import job_key_of

JOB_ID = contract.JOB_ID
ARRAY_JOB_ID = contract.ARRAY_JOB_ID
ARRAY_TASK_ID = contract.ARRAY_TASK_ID
RESTART_COUNT = contract.RESTART_COUNT


class Malformed(str):
    """A value given that is not of its variable's type, kept as its text: only the reader that uses it fails, with
    the variable's name and the text (the batch shell never needs the rendezvous port, and must not die of it). A
    str, not a dataclass: every process builds this class at import, and a dataclass costs a third of a millisecond.
    """

    __slots__ = ()


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


def requeue_marker_from(mapping: Mapping[str, str]) -> str | None:
    """The name of the requeue marker of this job (contract.requeue_marker_name); None outside Slurm."""
    key = key_from(mapping)
    return None if key is None else contract.requeue_marker_name(key)


def run_from(mapping: Mapping[str, str]) -> int:
    """This run's number in the run history: 1 for the first (Slurm's restart count + 1)."""
    return restart_count_from(mapping) + 1


def lead_seconds_from(mapping: Mapping[str, str]) -> int | None:
    """The lead time as the renderer exports it, whole seconds; None when unset or anything else."""
    raw = mapping.get(contract.LEAD_TIME, "")
    return int(raw) if raw.isdigit() else None


def restart_count_from(mapping: Mapping[str, str]) -> int:
    """How many times Slurm restarted this job. SLURM_RESTART_COUNT is unset (not 0) on the first run."""
    return restarts(mapping, RESTART_COUNT)


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
    return positive(mapping, contract.HANG_TIMEOUT)


def positive(mapping: Mapping[str, str], name: str) -> int | None:
    """A whole number above 0, else None (unset, empty, 0 or not digits): a limit that 0 switches off."""
    raw = mapping.get(name, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def restarts(mapping: Mapping[str, str], name: str) -> int:
    """A count that Slurm leaves unset (not 0) at first; a clear error when it is not a number or negative."""
    count = int_variable(mapping, name)
    if count is not None and count < 0:
        raise RuntimeSetupError(f"{name}={count} is negative")
    return count or 0


def whole(mapping: Mapping[str, str], name: str) -> int | None:
    """A whole number of ``name``, else None (unset, empty or not digits): for budgets and limits."""
    text = mapping.get(name, "").strip()
    return int(text) if text.isdigit() else None


def count(mapping: Mapping[str, str], name: str, default: int) -> int:
    """A whole number of ``name``, else ``default`` (unset, empty or not ASCII digits)."""
    raw = mapping.get(name, "").strip()
    return int(raw) if raw.isdigit() and raw.isascii() else default


def integer(mapping: Mapping[str, str], name: str, default: int) -> int | Malformed:
    """An integer (``int()``'s spelling), ``default`` when unset or blank, else the text as `Malformed`."""
    raw = mapping.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        return Malformed(raw)


def number(mapping: Mapping[str, str], name: str, default: float) -> float | Malformed:
    """A number (``float()``'s spelling), ``default`` when unset or blank, else the text as `Malformed`."""
    raw = mapping.get(name, "").strip()
    if not raw:
        return float(default)
    try:
        return float(raw)
    except ValueError:
        return Malformed(raw)


def seconds(mapping: Mapping[str, str], name: str) -> float | None:
    try:
        return float(mapping[name])
    except (KeyError, ValueError):
        return None


def lead(mapping: Mapping[str, str], name: str) -> float | None:
    """A number of seconds, 0.0 when unset or empty, None when it is not a number."""
    try:
        return float(mapping.get(name) or 0)
    except ValueError:
        return None


def text(mapping: Mapping[str, str], name: str) -> str | None:
    """A variable's value stripped of blanks; None when unset or blank."""
    return mapping.get(name, "").strip() or None


def given(mapping: Mapping[str, str], name: str) -> str | None:
    """The value as set, empty included; None when unset."""
    return mapping.get(name)


def nonempty(mapping: Mapping[str, str], name: str) -> str | None:
    """The value as set; None when unset or empty."""
    return mapping.get(name) or None


def verbatim(mapping: Mapping[str, str], name: str, default: str) -> str:
    """The value as set; ``default`` when unset."""
    return mapping.get(name, default)


def handler(mapping: Mapping[str, str], name: str, default: str) -> str:
    """One of contract.HANDLERS; ``default`` when unset or unknown."""
    value = mapping.get(name, "")
    return value if value in contract.HANDLERS else default


def names(mapping: Mapping[str, str], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list of names, each stripped of blanks; ``default`` when unset."""
    raw = mapping.get(name)
    return default if raw is None else tuple(item.strip() for item in raw.split(","))


def stamped_signals(mapping: Mapping[str, str], name: str) -> tuple[tuple[str, float | None], ...]:
    """``SIG@epoch ...`` as (name, epoch seconds) pairs, in order; the time None where it is not a number."""
    out: list[tuple[str, float | None]] = []
    for item in mapping.get(name, "").split():
        signal, _, when = item.partition("@")
        try:
            out.append((signal, float(when)))
        except ValueError:
            out.append((signal, None))
    return tuple(out)


def flag(mapping: Mapping[str, str], name: str) -> bool:
    return mapping.get(name) == "1"


def true_flag(mapping: Mapping[str, str], name: str) -> bool:
    """Python's spelling of true, as torchrun's agent writes it."""
    return mapping.get(name) == "True"


def present(mapping: Mapping[str, str], name: str) -> bool:
    return name in mapping
