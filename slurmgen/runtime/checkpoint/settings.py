"""What a checkpoint store keeps and accepts: read by the store (store.py) and by loading (loading.py), which
the store calls; a module of its own so that loading needs nothing of the store's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoreSettings:
    """What a store keeps and accepts: whose state it is, how many checkpoints stay, how files are read."""

    key: str  # this job's key: the default file name and the owner written into every state
    spec_hash: str = ""  # the spec the state belongs to ("" outside slurmgen's script)
    run: int = 0  # this run's restart count
    keep: int = 2  # complete sharded checkpoints kept
    named: bool = False  # a path the user named: resumed whoever wrote it
    weights_only: bool = True  # torch.load's safe loader
    crc32: bool = False  # torch's per-tensor checksum in a plain state file
    resume_from: str | None = None  # another job key whose state to start from when this job has none
