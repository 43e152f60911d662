"""Helpers around the process group: seeding, DDP on the right device, a named DeviceMesh."""

from __future__ import annotations

import os
import random
from typing import Any

from slurmgen.errors import RuntimeSetupError

# Outermost first, as torchtitan orders them: pipeline stages span the slowest links, tensor parallel the
# fastest (neighbouring ranks on one node).
MESH_DIMENSIONS = ("pp", "dp_replicate", "dp_shard", "ep", "tp")


def seed_everything(seed: int) -> int:
    """Seed Python's ``random``, NumPy (if installed) and torch (CPU and every GPU, if installed)."""
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # for child processes; this one's hash seed is fixed already
    try:
        import numpy  # optional; not a dependency
    except ImportError:
        pass
    else:
        numpy.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:
        pass
    else:
        torch.manual_seed(seed)  # seeds every CUDA device as well
    return seed


def mesh_layout(sizes: dict[str, int], world_size: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Shape and names of the mesh: only dimensions larger than 1; a flat ``("dp",)`` mesh when all are 1."""
    unknown = sorted(set(sizes) - set(MESH_DIMENSIONS))
    if unknown:
        known = ", ".join(MESH_DIMENSIONS)
        raise RuntimeSetupError(f"unknown mesh dimension(s) {', '.join(unknown)}; use {known}")
    bad = [f"{name}={size}" for name, size in sizes.items() if not isinstance(size, int) or size < 1]
    if bad:
        raise RuntimeSetupError(f"mesh sizes must be integers >= 1: {', '.join(bad)}")
    used = [(name, sizes[name]) for name in MESH_DIMENSIONS if sizes.get(name, 1) > 1]
    if not used:
        return (world_size,), ("dp",)
    product = 1
    for _, size in used:
        product *= size
    if product != world_size:
        given = " x ".join(f"{name}={size}" for name, size in used)
        raise RuntimeSetupError(f"mesh {given} = {product} ranks, but the world size is {world_size}")
    return tuple(size for _, size in used), tuple(name for name, _ in used)


def current_device() -> Any:
    """This rank's device: the one init_distributed chose, else CUDA by local rank when present, else CPU."""
    import torch

    from slurmgen.job_context.ranks import read_ranks
    from slurmgen.runtime import dist

    info = dist.current_info()
    if info is not None:
        return torch.device(info.device)
    if torch.cuda.is_available():
        local = read_ranks(os.environ).local_rank
        return torch.device("cuda", dist.select_device_index(local, torch.cuda.device_count()))
    return torch.device("cpu")


def wrap_ddp(model: Any, **ddp_options: Any) -> Any:
    """Move ``model`` to this rank's device and wrap it in DistributedDataParallel there."""
    from torch.nn.parallel import DistributedDataParallel

    device = current_device()
    model = model.to(device)
    if device.type == "cuda":
        return DistributedDataParallel(model, device_ids=[device.index], output_device=device.index, **ddp_options)
    return DistributedDataParallel(model, **ddp_options)


def build_mesh(
    pp: int = 1,
    dp_replicate: int = 1,
    dp_shard: int = 1,
    ep: int = 1,
    tp: int = 1,
    device_type: str | None = None,
) -> Any:
    """A DeviceMesh named by parallelism (``pp``, ``dp_replicate``, ``dp_shard``, ``ep``, ``tp``).

    Only sizes larger than 1 become dimensions (``mesh["tp"]``); all 1 gives a flat ``("dp",)`` mesh over the
    world. Sizes whose product is not the world size are refused before torch sees them.
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    if not dist.is_initialized():
        raise RuntimeSetupError("build_mesh() needs an initialised process group (init_distributed())")
    sizes = {"pp": pp, "dp_replicate": dp_replicate, "dp_shard": dp_shard, "ep": ep, "tp": tp}
    shape, names = mesh_layout(sizes, dist.get_world_size())
    device_type = device_type or ("cuda" if torch.cuda.is_available() else "cpu")
    return init_device_mesh(device_type, shape, mesh_dim_names=names)
