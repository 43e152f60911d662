"""Who am I: ranks, world size, job identity, all read from a mapping (os.environ by default).

Precedence: torchrun's variables first (inside ``srun ... torchrun`` SLURM_PROCID is the node index, not the
rank), then SLURM's, else a single process. Pure functions take the mapping; the public ones default to
``os.environ``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError

# habitat-lab and Lightning treat a job with one of these names as an interactive allocation (salloc/srun
# --pty), where requeueing makes no sense. A job rendered by slurmgen exports SLURMGEN_JOB_NAME and is always
# a batch job, whatever the user named it (a batch job named "sh" must still requeue).
_INTERACTIVE_NAMES = frozenset({"bash", "zsh", "fish", "tcsh", "sh", "interactive"})


@dataclass(frozen=True)
class Ranks:
    """Where this process sits. ``source`` is "torchrun", "slurm" or "single"."""

    local_rank: int
    rank: int
    world_size: int
    local_world_size: int | None
    source: str


def _int(mapping: Mapping[str, str], name: str) -> int | None:
    raw = mapping.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise RuntimeSetupError(f"{name}={raw!r} is not an integer") from None


def read_ranks(mapping: Mapping[str, str]) -> Ranks:
    """Ranks from torchrun's variables, else SLURM's, else a single process. Raises on inconsistent values."""
    rank, world = _int(mapping, contract.RANK), _int(mapping, contract.WORLD_SIZE)
    if rank is not None or world is not None:
        if rank is None or world is None:
            have, missing = (
                (contract.RANK, contract.WORLD_SIZE) if world is None else (contract.WORLD_SIZE, contract.RANK)
            )
            raise RuntimeSetupError(f"{have} is set but {missing} is not; set both (or neither)")
        local = _int(mapping, contract.LOCAL_RANK)
        ranks = Ranks(0 if local is None else local, rank, world, _int(mapping, contract.LOCAL_WORLD_SIZE), "torchrun")
    else:
        procid, ntasks = _int(mapping, "SLURM_PROCID"), _int(mapping, "SLURM_NTASKS")
        if procid is None or ntasks is None:
            return Ranks(0, 0, 1, 1, "single")
        local = _int(mapping, "SLURM_LOCALID")
        ranks = Ranks(0 if local is None else local, procid, ntasks, slurm_local_world_size(mapping), "slurm")
    if not 0 <= ranks.rank < ranks.world_size:
        raise RuntimeSetupError(f"rank {ranks.rank} is outside world size {ranks.world_size} ({ranks.source})")
    if ranks.local_rank < 0:
        raise RuntimeSetupError(f"local rank {ranks.local_rank} is negative ({ranks.source})")
    return ranks


def parse_tasks_per_node(value: str) -> list[int]:
    """Expand SLURM_TASKS_PER_NODE, e.g. ``"2(x3),1"`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for item in value.split(","):
        count, repeat, times = item.strip().partition("(x")
        try:
            if repeat and not times.endswith(")"):
                raise ValueError(item)
            counts.extend([int(count)] * (int(times[:-1]) if repeat else 1))
        except ValueError:
            raise RuntimeSetupError(f"cannot parse tasks per node {value!r}") from None
    return counts


def slurm_local_world_size(mapping: Mapping[str, str]) -> int | None:
    """Tasks on this node, from the step's (else the job's) tasks-per-node and SLURM_NODEID.

    Not ``ntasks // nnodes``: with uneven tasks per node (``2(x3),1``, sbatch(1) SLURM_TASKS_PER_NODE) that is
    wrong.
    """
    value = mapping.get("SLURM_STEP_TASKS_PER_NODE") or mapping.get("SLURM_TASKS_PER_NODE")
    node = _int(mapping, "SLURM_NODEID")
    if not value or node is None:
        return None
    counts = parse_tasks_per_node(value)
    return counts[node] if 0 <= node < len(counts) else None


def standard_rank_variables(ranks: Ranks) -> dict[str, str]:
    """The torch variables env:// needs, for ranks read from SLURM's."""
    values = {
        contract.RANK: str(ranks.rank),
        contract.LOCAL_RANK: str(ranks.local_rank),
        contract.WORLD_SIZE: str(ranks.world_size),
    }
    if ranks.local_world_size is not None:
        values[contract.LOCAL_WORLD_SIZE] = str(ranks.local_world_size)
    return values


def get_distrib_size(environ: MutableMapping[str, str] | None = None) -> tuple[int, int, int]:
    """``(local_rank, world_rank, world_size)``: torchrun's variables, else SLURM's, else ``(0, 0, 1)``.

    When the ranks come from SLURM, the standard variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE)
    are also set in ``environ`` (os.environ by default) where missing, so an ``env://`` init works unchanged.
    """
    env = os.environ if environ is None else environ
    ranks = read_ranks(env)
    if ranks.source == "slurm":
        for name, value in standard_rank_variables(ranks).items():
            env.setdefault(name, value)
    return ranks.local_rank, ranks.rank, ranks.world_size


def restart_count(mapping: Mapping[str, str] | None = None) -> int:
    """How many times Slurm restarted this job. SLURM_RESTART_COUNT is unset (not 0) on the first run."""
    count = _int(os.environ if mapping is None else mapping, "SLURM_RESTART_COUNT")
    if count is not None and count < 0:
        raise RuntimeSetupError(f"SLURM_RESTART_COUNT={count} is negative")
    return count or 0


def job_key(mapping: Mapping[str, str] | None = None) -> str | None:
    """The id that names this job to ``scontrol``: ``<array job>_<task>`` for array tasks, else the job id.

    Requeueing an array task by its bare SLURM_JOB_ID is right, but by SLURM_ARRAY_JOB_ID alone requeues the
    whole array (Lightning #15022); ``A_T`` is unambiguous. None outside Slurm.
    """
    env = os.environ if mapping is None else mapping
    array_job, array_task = env.get("SLURM_ARRAY_JOB_ID", ""), env.get("SLURM_ARRAY_TASK_ID", "")
    job = env.get("SLURM_JOB_ID", "")
    parts = [array_job, array_task] if array_job and array_task else [job]
    if not parts[0]:
        return None
    for part in parts:
        if not (part.isdigit() and part.isascii()):
            raise RuntimeSetupError(f"job id {part!r} is not a number (SLURM_JOB_ID / SLURM_ARRAY_*)")
    return "_".join(parts)


def is_slurm_batch_job(mapping: Mapping[str, str] | None = None) -> bool:
    """True inside a batch job (not an interactive ``salloc``/``srun --pty`` shell)."""
    env = os.environ if mapping is None else mapping
    if not env.get("SLURM_JOB_ID"):
        return False
    if env.get(contract.JOB_NAME):
        return True
    return env.get("SLURM_JOB_NAME", "") not in _INTERACTIVE_NAMES


def is_rank_zero(mapping: Mapping[str, str] | None = None) -> bool:
    """True on global rank 0: the process group's rank when one is initialised, else the environment's."""
    dist = sys.modules.get("torch.distributed")  # never import torch just to answer this
    if dist is not None and dist.is_available() and dist.is_initialized():
        return bool(dist.get_rank() == 0)
    return read_ranks(os.environ if mapping is None else mapping).rank == 0
