"""The runtime's public questions about the job (slurmgen.runtime exports them): ranks, run count, key, batch or not.

Each takes a mapping and defaults to ``os.environ``: these are called by the user's program, whose entry point is
its own; the answer is the job context's (one parse per fact, slurmgen.job_context).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

from slurmgen import contract
from slurmgen.job_context.ranks import read_ranks, standard_rank_variables
from slurmgen.job_context.values import JOB_ID, key_from, restart_count_from

# habitat-lab and Lightning treat a job with one of these names as an interactive allocation (salloc/srun
# --pty), where requeueing makes no sense. A job rendered by slurmgen exports SLURMGEN_JOB_NAME and is always
# a batch job, whatever the user named it (a batch job named "sh" must still requeue).
_INTERACTIVE_NAMES = frozenset({"bash", "zsh", "fish", "tcsh", "sh", "interactive"})


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
    return restart_count_from(os.environ if mapping is None else mapping)


def job_key(mapping: Mapping[str, str] | None = None) -> str | None:
    """The id that names this job to ``scontrol``: ``<array job>_<task>`` for an array task, else the job id
    (slurmgen.slurm.ids.job_key_of, the one place of the rule). None outside Slurm."""
    return key_from(os.environ if mapping is None else mapping)


def is_slurm_batch_job(mapping: Mapping[str, str] | None = None) -> bool:
    """True inside a batch job (not an interactive ``salloc``/``srun --pty`` shell)."""
    env = os.environ if mapping is None else mapping
    if not env.get(JOB_ID):
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
