"""One sharded save, start to durable: agree on a name, every rank writes, rank 0 commits, old ones go.

    rank 0 picks `.<name>.<seq>.<token>.tmp` and broadcasts it     (one name for every rank)
    every rank writes its shards there, fsyncs files and directory  (dcp_io: "shards-written")
    rank 0 writes DCP's .metadata once all ranks are done           (dcp_io: "metadata-written")
    rank 0 writes MARKER, fsyncs it and the directory               ("before-commit")
    rank 0 renames the directory to `<name>.<seq>`, fsyncs parent   ("after-commit"): the one commit point
    rank 0 broadcasts the record (or its failure); every rank returns it
    rank 0 deletes checkpoints beyond the newest `keep`

A kill of any rank before the rename leaves a temporary directory and the previous checkpoints as they were;
after it, the new checkpoint is complete. The collectives run over a gloo group of their own, so a save can
run on a background thread while the training thread uses the default group and the stop agreement's group
(gloo matches collectives by their order within a group; two threads issuing on one group could pair one
thread's broadcast with the other's all_reduce).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

from slurmgen import atomic, trust
from slurmgen.errors import SlurmgenError
from slurmgen.runtime.checkpoint import dcp_io, layout
from slurmgen.runtime.checkpoint.record import SaveRecord


class CheckpointError(SlurmgenError):
    """A save or load failed on every rank alike (a full disk, an unreadable checkpoint); the previous complete
    checkpoint is untouched."""


def _broadcast(value: Any, group: Any) -> Any:
    if group is None:
        return value
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0, group=group)  # src is a global rank; the group spans the world
    return box[0]


def _commit(tmp: str, final: str, directory: str, marker: dict[str, Any], phase: dcp_io.Phase) -> int:
    """Rank 0, after every rank's shards and the metadata are durable: make the checkpoint visible."""
    trust.make_private(tmp)  # the loader reads only what no other user can write (slurmgen/trust.py)
    # Written atomically and durably (file and directory fsynced), though nobody can see `tmp` yet.
    atomic.write_bytes(os.path.join(tmp, layout.MARKER), json.dumps(marker, sort_keys=True).encode() + b"\n", 0o644)
    phase(dcp_io.BEFORE_COMMIT)
    os.rename(tmp, final)
    atomic.fsync_dir(directory)
    phase(dcp_io.AFTER_COMMIT)
    return layout.tree_size(final)


def save_sharded(
    state: dict[str, Any],
    *,
    directory: str,
    name: str,
    group: Any,
    rank: int,
    world_size: int,
    marker: dict[str, Any],
    keep: int,
    phase: dcp_io.Phase,
    started: float,
    blocked_s: float | None,
    log: Callable[[str], None],
    crc32: bool = False,
) -> SaveRecord:
    """Write `state` (already free of Stateful objects) as checkpoint `<directory>/<name>.<seq>` on every rank.

    `blocked_s` is how long the caller was held up by a background save (None: a synchronous save, held up
    throughout). Raises CheckpointError on every rank when the save failed alike everywhere; any other
    exception means a collective broke (a peer died): the caller decides how to end.
    """
    seq_and_tmp = None
    if rank == 0:
        os.makedirs(directory, exist_ok=True)
        seq = layout.next_seq(name, layout.list_dir(directory))
        seq_and_tmp = (seq, layout.temp_name(name, seq))
    seq, tmp_name = _broadcast(seq_and_tmp, group)
    tmp = os.path.join(directory, tmp_name)
    final = os.path.join(directory, layout.complete_name(name, seq))
    try:
        dcp_io.write(state, tmp, group, phase, crc32)
    except BaseException as exc:
        if not dcp_io.is_consistent_failure(exc):
            raise
        reason = dcp_io.describe_failure(exc, directory)  # before the partial files go: a full disk is still full
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointError(f"sharded save to {final} failed: {reason}") from None
    outcome: SaveRecord | str
    if rank == 0:
        try:
            meta = {**marker, "world_size": world_size, "torch": dcp_io.torch_version(), "time": time.time()}
            size = _commit(tmp, final, directory, meta, phase)
            duration = time.monotonic() - started
            outcome = SaveRecord(
                path=final,
                kind="sharded",
                cause=str(marker.get("cause", "")),
                size_bytes=size,
                duration_s=duration,
                blocked_s=duration if blocked_s is None else blocked_s,
                world_size=world_size,
                finished_at=time.time(),
            )
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            outcome = f"committing {final} failed: {exc}"
    else:
        outcome = ""
    outcome = _broadcast(outcome, group)  # also the barrier: no rank reports durable before the rename
    if isinstance(outcome, str):
        raise CheckpointError(outcome)
    if rank == 0:
        for old in layout.to_prune([s for s, _ in layout.complete_dirs(directory, name)], keep):
            with contextlib.suppress(OSError):  # a failed delete costs disk space, never a checkpoint
                layout.remove(directory, name, old)
        log(
            f"saved state to {final} (sharded over {world_size} ranks, {outcome.size_bytes / 2**20:.1f} MiB in "
            f"{outcome.duration_s:.2f} s{_blocked(blocked_s)}, {outcome.cause})"
        )
    duration = time.monotonic() - started
    return dataclasses.replace(outcome, duration_s=duration, blocked_s=duration if blocked_s is None else blocked_s)


def _blocked(blocked_s: float | None) -> str:
    return "" if blocked_s is None else f" in the background, training blocked {blocked_s:.2f} s"
