"""Who this job is and what it was given, read from the environment once per process.

The rendered script exports the contract's variables (slurmgen/contract.py) and Slurm exports its own; the batch
shell's helper, each task's supervisor and the user's program each build one `JobContext` from them at start and
pass it (or the few fields a function needs) down, instead of parsing the same variables again at every hop.

The job-key rule (the id that names this job to `scontrol`) is slurmgen.slurm.ids.job_key_of; `key_from` applies it
to Slurm's variables, and the rendered script computes the same key in bash from `KEY_SHELL`, written beside it.

Standard library only (contract, errors and slurm.ids are standard-library leaves): every process imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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


def _limit(mapping: Mapping[str, str], name: str) -> int | None:
    text = mapping.get(name, "").strip()
    return int(text) if text.isdigit() else None


def _seconds(mapping: Mapping[str, str], name: str) -> float | None:
    try:
        return float(mapping[name])
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True)
class JobContext:
    """This process's job, read once: its key, run, directories, preemption settings, budgets and limits."""

    key: str | None  # job_key_of: None outside Slurm
    job_id: str  # SLURM_JOB_ID ("" outside Slurm): what `scontrol show step` and `scancel` take for the step
    restart_count: int  # SLURM_RESTART_COUNT, 0 on the first run
    log_dir: str | None  # the per-job log directory; its history/ is the run history (None outside the script)
    state_dir: str | None  # where the resume state lives
    preempt_signal: str | None  # "USR1"; None when preemption is off
    handler: str  # preemption.handler, auto when unset or unknown
    max_requeues: int | None  # preemption.max_requeues; None: no limit
    max_preemptions: int | None  # preemption.max_preemptions; None: no limit
    requeue_on_failure: bool
    in_container: bool  # the tasks run in a container image: no scontrol there
    start_time: float | None  # this run's batch shell start (epoch seconds)
    time_limit: float | None  # seconds
    lead_time: float | None  # seconds before the time limit at which the signal comes
    lead_seconds: int | None  # the same, as the spec gave it (whole seconds), for the site's window
    spec_hash: str | None
    signals: str  # SLURMGEN_SIGNALS: what reached the batch shell, `SIG@epoch ...`
    environ: Mapping[str, str] = field(repr=False, compare=False)  # the rest (node list, partition, ...)

    @property
    def run(self) -> int:
        """This run's number in the run history: 1 for the first."""
        return self.restart_count + 1

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> JobContext:
        handler = environ.get(contract.PREEMPT_HANDLER, "")
        lead = environ.get(contract.LEAD_TIME, "")
        return cls(
            key=key_from(environ),
            job_id=environ.get(JOB_ID, ""),
            restart_count=restart_count_from(environ),
            log_dir=environ.get(contract.LOG_DIR) or None,
            state_dir=environ.get(contract.STATE_DIR) or None,
            preempt_signal=environ.get(contract.PREEMPT_SIGNAL) or None,
            handler=handler if handler in contract.HANDLERS else contract.HANDLER_AUTO,
            max_requeues=_limit(environ, contract.MAX_REQUEUES),
            max_preemptions=_limit(environ, contract.MAX_PREEMPTIONS),
            requeue_on_failure=environ.get(contract.REQUEUE_ON_FAILURE) == "1",
            in_container=environ.get(contract.CONTAINER) == "1",
            start_time=_seconds(environ, contract.START_TIME),
            time_limit=_seconds(environ, contract.TIME_LIMIT),
            lead_time=float(environ.get(contract.LEAD_TIME) or 0) if _lead_ok(environ) else None,
            lead_seconds=int(lead) if lead.isdigit() else None,
            spec_hash=environ.get(contract.SPEC_HASH),
            signals=environ.get(contract.SIGNALS, ""),
            environ=environ,
        )

    @classmethod
    def of(cls, source: JobContext | Mapping[str, str]) -> JobContext:
        """A context as given, or one read from a mapping (the entry points accept either)."""
        return source if isinstance(source, JobContext) else cls.from_environ(source)


def _lead_ok(environ: Mapping[str, str]) -> bool:
    try:
        float(environ.get(contract.LEAD_TIME) or 0)
    except ValueError:
        return False
    return True
