"""Where this process sits: rank, local rank, world size, read from a mapping.

Precedence: torchrun's variables first (inside ``srun ... torchrun`` SLURM_PROCID is the node index, not the
rank), then SLURM's, else a single process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.values import int_variable


@dataclass(frozen=True)
class Ranks:
    """Where this process sits. ``source`` is "torchrun", "slurm" or "single"."""

    local_rank: int
    rank: int
    world_size: int
    local_world_size: int | None
    source: str


def read_ranks(mapping: Mapping[str, str]) -> Ranks:
    """Ranks from torchrun's variables, else SLURM's, else a single process. Raises on inconsistent values."""
    rank, world = int_variable(mapping, contract.RANK), int_variable(mapping, contract.WORLD_SIZE)
    if rank is not None or world is not None:
        if rank is None or world is None:
            have, missing = (
                (contract.RANK, contract.WORLD_SIZE) if world is None else (contract.WORLD_SIZE, contract.RANK)
            )
            raise RuntimeSetupError(f"{have} is set but {missing} is not; set both (or neither)")
        local = int_variable(mapping, contract.LOCAL_RANK)
        ranks = Ranks(
            0 if local is None else local, rank, world, int_variable(mapping, contract.LOCAL_WORLD_SIZE), "torchrun"
        )
    else:
        procid, ntasks = int_variable(mapping, "SLURM_PROCID"), int_variable(mapping, "SLURM_NTASKS")
        if procid is None or ntasks is None:
            return Ranks(0, 0, 1, 1, "single")
        local = int_variable(mapping, "SLURM_LOCALID")
        ranks = Ranks(0 if local is None else local, procid, ntasks, slurm_local_world_size(mapping), "slurm")
    if not 0 <= ranks.rank < ranks.world_size:
        raise RuntimeSetupError(f"rank {ranks.rank} is outside world size {ranks.world_size} ({ranks.source})")
    if ranks.local_rank < 0:
        raise RuntimeSetupError(f"local rank {ranks.local_rank} is negative ({ranks.source})")
    return ranks


def process_rank(mapping: Mapping[str, str]) -> int:
    """This process's global rank for a question about rank 0 only: `read_ranks`'s, else a lone RANK (torchrun's,
    first) or SLURM_PROCID without its world size (a program started by hand with RANK=0), else 0."""
    try:
        ranks = read_ranks(mapping)
        if ranks.source != "single":
            return ranks.rank
    except RuntimeSetupError:
        pass
    for name in (contract.RANK, "SLURM_PROCID"):
        raw = mapping.get(name, "").strip()
        if raw.isdigit():
            return int(raw)
    return 0


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
    node = int_variable(mapping, "SLURM_NODEID")
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
