"""Every rank writes and reads its own shards with torch.distributed.checkpoint (DCP), durably.

DCP's FileSystemWriter already fsyncs each shard file and the `.metadata` file (torch/distributed/checkpoint/
filesystem.py, `_write_files_from_queue` and `_FileSystemWriter.finish`), but not the directory that holds
them: after a power loss a file can be durable and its name gone. The writer here adds the directory fsync,
on each rank after its shards and on the coordinator after the metadata, and reports each phase to a hook
(the crash tests kill a rank there).

Ordering that the commit relies on: dcp.save's last step gathers every rank's write results on the coordinator
(rank 0 of the group) and only then calls `finish` there, which writes `.metadata`; the result is broadcast
back (torch/distributed/checkpoint/state_dict_saver.py `_save_state_dict`, `all_reduce("write", ...)`;
utils.py `_DistWrapper.all_reduce`). So once dcp.save returns on rank 0, every rank's shards are durable,
and rank 0 may commit the directory.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from slurmgen.atomic import fsync_dir
from slurmgen.runtime.checkpoint import write_failure

Phase = Callable[[str], None]
# The phases of a sharded save, in order, as the crash tests name them.
SHARDS_WRITTEN, METADATA_WRITTEN, BEFORE_COMMIT, AFTER_COMMIT = (
    "shards-written",
    "metadata-written",
    "before-commit",
    "after-commit",
)
PHASES = (SHARDS_WRITTEN, METADATA_WRITTEN, BEFORE_COMMIT, AFTER_COMMIT)


@functools.cache
def _writer_class() -> Any:
    from torch.distributed.checkpoint.filesystem import FileSystemWriter

    # (Without torch installed, mypy sees FileSystemWriter as Any.)
    class DurableWriter(FileSystemWriter):  # type: ignore[misc,unused-ignore]
        """FileSystemWriter plus directory fsyncs and phase reports."""

        def __init__(self, path: str, phase: Phase) -> None:
            # One file per rank, fsynced (sync_files); a fresh directory, so nothing to overwrite.
            super().__init__(path, single_file_per_rank=True, sync_files=True, overwrite=False)
            self._phase = phase
            self._dir = path

        def write_data(self, plan: Any, planner: Any) -> Any:
            result = super().write_data(plan, planner)  # returns once this rank's files are written and fsynced
            result.wait()
            fsync_dir(self._dir)
            self._phase(SHARDS_WRITTEN)
            return result

        def finish(self, metadata: Any, results: Any) -> None:
            super().finish(metadata, results)  # coordinator only, after every rank's write_data
            fsync_dir(self._dir)
            self._phase(METADATA_WRITTEN)

    return DurableWriter


def _quiet_single_process() -> None:
    # dcp.save/load warn on every call without a process group, even when told so with no_dist=True
    # (torch/distributed/checkpoint/state_dict_saver.py `save`); a one-process job saves sharded states too.
    warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


def write(state: dict[str, Any], directory: str, group: Any, phase: Phase, crc32: bool = False) -> None:
    """Write this rank's part of `state` into `directory` (created by whichever rank gets there first).

    DCP torch.save-s each tensor into the rank's file, and torch's zip records carry a CRC32 of each one (about
    0.3 s per GiB of CPU here; see runtime/state.py). The commit already guarantees complete files, so it is
    optional, as for the plain state. The switch is torch's global serialization config: a torch.save of the
    program's own on another thread during the write skips its checksum too.
    """
    from torch.distributed.checkpoint.state_dict_saver import save
    from torch.utils.serialization import config

    if group is None:
        _quiet_single_process()
    with config.patch({"save.compute_crc32": crc32}):  # type: ignore[attr-defined]
        save(state, storage_writer=_writer_class()(directory, phase), process_group=group, no_dist=group is None)


def read(into: dict[str, Any], directory: str, group: Any, weights_only: bool = True) -> None:
    """Fill `into` in place from the checkpoint in `directory`, resharding to this world's layout: each rank
    reads the parts of the saved shards that overlap its own (DCP's load planner). Nothing in the files runs
    code (dcp_safe.py)."""
    from torch.distributed.checkpoint.state_dict_loader import load

    from slurmgen.runtime.checkpoint import dcp_safe

    if group is None:
        _quiet_single_process()
    load(into, checkpoint_id=directory, storage_reader=dcp_safe.reader(directory),
         planner=dcp_safe.planner(weights_only), process_group=group, no_dist=group is None)  # fmt: skip


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def is_consistent_failure(exc: BaseException) -> bool:
    """A failure DCP gathered and raised on every rank alike (a full disk on one rank, say); anything else
    raised by a save is a collective that broke: a peer died or stopped answering. (CheckpointException derives
    from BaseException, not Exception: torch/distributed/checkpoint/api.py.)"""
    from torch.distributed.checkpoint.api import CheckpointException

    return isinstance(exc, CheckpointException)


def describe_failure(exc: BaseException, directory: str | None = None) -> str:
    """One line for a CheckpointException: each failing rank and its error (torch's str() is tracebacks). With
    the `directory` written to, a write's cause is named too (disk full, quota, permission: write_failure.py);
    call it before the partial files are removed, while a full disk is still full."""
    failures = getattr(exc, "failures", None)
    if not isinstance(failures, dict) or not failures:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    parts = []
    for rank, (error, _) in sorted(failures.items()):
        if directory is not None and isinstance(error, BaseException):
            parts.append(f"rank {rank}: {write_failure.describe(error, directory)}")
            continue
        first = (str(error).strip().splitlines() or [""])[0][:200]
        parts.append(f"rank {rank}: {type(error).__name__}: {first}")
    return "; ".join(parts)
