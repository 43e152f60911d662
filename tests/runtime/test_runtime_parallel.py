"""Mesh layout, device choice and seeding, without processes."""

from __future__ import annotations

import random

import pytest

from slurmgen.errors import RuntimeSetupError
from slurmgen.runtime.dist import select_device_index
from slurmgen.runtime.parallel import mesh_layout, seed_everything


@pytest.mark.parametrize(
    ("sizes", "world", "layout"),
    [
        ({}, 8, ((8,), ("dp",))),
        ({"pp": 1, "tp": 1}, 1, ((1,), ("dp",))),
        ({"dp_shard": 8}, 8, ((8,), ("dp_shard",))),
        ({"tp": 2, "pp": 2, "dp_shard": 2}, 8, ((2, 2, 2), ("pp", "dp_shard", "tp"))),
        (
            {"dp_replicate": 2, "dp_shard": 2, "ep": 2, "tp": 2, "pp": 2},
            32,
            ((2, 2, 2, 2, 2), ("pp", "dp_replicate", "dp_shard", "ep", "tp")),
        ),
    ],
)
def test_mesh_layout(sizes: dict[str, int], world: int, layout: tuple[tuple[int, ...], tuple[str, ...]]) -> None:
    assert mesh_layout(sizes, world) == layout


@pytest.mark.parametrize(
    ("sizes", "world", "message"),
    [
        ({"tp": 2, "dp_shard": 3}, 8, r"mesh dp_shard=3 x tp=2 = 6 ranks, but the world size is 8"),
        ({"tp": 0}, 4, "integers >= 1: tp=0"),
        ({"cp": 2}, 2, "unknown mesh dimension"),
    ],
)
def test_mesh_layout_rejects(sizes: dict[str, int], world: int, message: str) -> None:
    with pytest.raises(RuntimeSetupError, match=message):
        mesh_layout(sizes, world)


@pytest.mark.parametrize(("local", "count", "index"), [(0, 4, 0), (3, 4, 3), (1, 1, 0), (7, 1, 0)])
def test_device_by_local_rank(local: int, count: int, index: int) -> None:
    assert select_device_index(local, count) == index  # one visible GPU per task: always that one


def test_a_local_rank_beyond_the_gpus_is_refused() -> None:
    # Wrapping rank 5 onto GPU 1 would give two ranks one GPU, and NCCL fails later far from the cause.
    with pytest.raises(RuntimeSetupError, match="local rank 5 has no GPU of its own: this task sees 4 GPUs"):
        select_device_index(5, 4)


def test_seed_everything_is_reproducible() -> None:
    seed_everything(123)
    first = random.random()  # noqa: S311 - reproducibility, not secrecy
    seed_everything(123)
    assert random.random() == first  # noqa: S311


@pytest.mark.torch
def test_seed_everything_seeds_torch() -> None:
    import torch

    seed_everything(5)
    a = torch.rand(3)
    seed_everything(5)
    assert torch.equal(a, torch.rand(3))
