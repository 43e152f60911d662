"""Reading a sharded checkpoint without running its author's code.

torch.distributed.checkpoint reads `.metadata` with a bare pickle.load (torch/distributed/checkpoint/filesystem.py,
FileSystemReader.read_metadata) and each non-tensor entry with torch.load(weights_only=False)
(default_planner.py, DefaultLoadPlanner.load_bytes). Ownership (slurmgen/trust.py) keeps other users' files out, but a
checkpoint a colleague shared and this user copied (`cp -r`) is this user's after the copy: the bytes are still
the colleague's. So `.metadata` goes through an unpickler that admits only the types DCP's metadata is made of
(listed below, as torch 2.x pickles them), and the entries through torch's safe loader (weights_only=True) unless
the user turned it off for their own states (Preemption(weights_only=False)).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

# Every global a DCP `.metadata` names (torch 2.4 to 2.13): the metadata dataclasses, the storage info, the
# tensor properties' dtype (any torch dtype), layout (by name) and memory format, sizes, and the checkpoint id.
_METADATA = "torch.distributed.checkpoint.metadata"
ALLOWED = {
    (_METADATA, name)
    for name in (
        "Metadata",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "TensorProperties",
        "MetadataIndex",
        "StorageMeta",
        "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("torch", "device"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("collections", "OrderedDict"),
}


class RefusedGlobal(pickle.UnpicklingError):
    """A `.metadata` names something DCP's metadata never holds: it was crafted, and is not unpickled."""


class MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        import torch

        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        if (module, name) not in ALLOWED:
            raise RefusedGlobal(f"refused {module}.{name}: not a type of torch's checkpoint metadata")
        return super().find_class(module, name)


def load_metadata(data: bytes) -> Any:
    return MetadataUnpickler(io.BytesIO(data)).load()


def reader(path: str) -> Any:
    """A FileSystemReader for `path` whose metadata goes through MetadataUnpickler."""
    from torch.distributed.checkpoint.filesystem import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            # As FileSystemReader.read_metadata, with the restricted unpickler in place of pickle.load.
            with self.fs.create_stream(self._get_metadata_path(kwargs.get("rank")), "rb") as stream:
                metadata = load_metadata(stream.read())
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(path)


def planner(weights_only: bool = True) -> Any:
    """DCP's default load planner, reading non-tensor entries with torch's safe loader."""
    import torch
    from torch.distributed.checkpoint._traverse import set_element  # as default_planner.py imports it
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    from torch.distributed.checkpoint.planner import ReadItem

    class SafePlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
            loaded = torch.load(value, weights_only=weights_only)
            if self.flatten_state_dict:
                set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], loaded)
            else:
                self.state_dict[read_item.dest_index.fqn] = loaded

    return SafePlanner()
