"""The resume state on disk: written atomically, read back on CPU, keyed to the job that wrote it.

A write goes to a temporary file in the same directory (same filesystem, so the rename is atomic), is flushed and
fsynced, renamed over the old state, and the directory is fsynced so the rename itself survives a crash. A kill at any
moment leaves either the old state or the new one, never a torn file (Lightning #688 lost checkpoints to a torch.save
straight onto the target); what it can leave is an orphan temporary file, which `sweep()` removes at start.

Standard library at import; torch is imported only when a state is saved or loaded (pickle without torch).
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

from slurmgen.atomic import replace_with
from slurmgen.errors import RuntimeSetupError
from slurmgen.runtime.checkpoint import write_failure
from slurmgen.runtime.checkpoint.write_failure import WriteFailed

FORMAT = 1


class _PlainUnpickler(pickle.Unpickler):
    """Dicts, lists, tuples, sets, numbers, text and bytes (pickle's own opcodes), and nothing named: a state
    saved without torch holds plain data, and a name to look up is how a crafted pickle runs code."""

    _ALLOWED = frozenset({("builtins", "complex"), ("builtins", "bytearray"), ("collections", "OrderedDict")})

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"Unsupported global: {module}.{name} (not plain data)")
        return super().find_class(module, name)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _torch_save(torch: Any, payload: Any, path: str, crc32: bool) -> None:
    """torch.save by path (torch's own buffered C++ writer, no Python-level copies). Its zip format stores a
    CRC32 of every tensor, which costs about 0.3 s per GiB here, half the cost of the write itself; the atomic
    rename already guarantees a complete file, so the checksum is optional (Preemption(crc32=True))."""
    try:
        from torch.utils.serialization import config
    except ImportError:  # older torch: always checksummed
        torch.save(payload, path)
        return
    with config.patch({"save.compute_crc32": crc32}):  # type: ignore[attr-defined]
        torch.save(payload, path)


def write_atomic(path: str, payload: Any, crc32: bool = False) -> int:
    """Write ``payload`` (anything torch.save or pickle takes) to ``path`` atomically; returns its size in bytes.

    Raises WriteFailed (one line naming the cause: disk full, quota, permission) when it cannot; the file that
    was at ``path`` is then untouched."""
    directory = os.path.dirname(os.path.abspath(path))
    torch = _torch()

    def write(tmp: str) -> None:
        try:
            if torch is not None:
                _torch_save(torch, payload, tmp, crc32)
            else:
                with open(tmp, "wb") as handle:
                    pickle.dump(payload, handle, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # described now, while the partial file still fills the disk
            raise WriteFailed(write_failure.describe(exc, directory)) from exc

    try:
        os.makedirs(directory, exist_ok=True)
        return replace_with(path, write)
    except OSError as exc:  # the directory, the temporary file, fsync or rename (NFS reports quotas at close)
        raise WriteFailed(write_failure.describe(exc, directory)) from exc


def envelope(state: Any, job: str, spec: str, run: int, cause: str) -> dict[str, Any]:
    """What goes on disk: the user's state plus whose it is."""
    meta = {"format": FORMAT, "job": job, "spec": spec, "run": run, "cause": cause, "time": time.time()}
    return {"slurmgen": meta, "state": state}


class Unreadable(ValueError):
    """The file is no readable resume state (truncated, corrupt, not ours); the message is one phrase."""


def read(path: str, weights_only: bool = True, shown: str | None = None) -> dict[str, Any] | None:
    """The envelope at `path` (tensors on CPU), or None if there is none. `shown`: the name to give `path` in
    messages (the loader reads through /proc/self/fd/N). Raises Unreadable for a file that is not a whole
    resume state, RuntimeSetupError when torch's safe loader refuses an object in a whole one."""
    shown = shown or path
    if not os.path.exists(path):
        return None
    torch = _torch()
    try:
        if torch is not None:
            data = torch.load(path, map_location="cpu", weights_only=weights_only)
        else:
            with open(path, "rb") as handle:
                # Without torch, the safe loader's counterpart: plain data only, never a class or a function.
                data = (_PlainUnpickler(handle) if weights_only else pickle.Unpickler(handle)).load()  # noqa: S301
    except pickle.UnpicklingError as exc:
        # torch's safe loader says "Unsupported global" for an object it refuses in a whole file; for bytes that
        # are no pickle at all (a corrupt file) it gives the same advice to turn it off, which would not help.
        refused = [line.strip() for line in str(exc).splitlines() if "Unsupported global" in line]
        if refused:
            raise RuntimeSetupError(
                f"{shown}: torch's safe loader refuses an object in the state ({refused[0][:300]}); if you trust "
                "the file, use Preemption(weights_only=False)"
            ) from None
        # Not the advice (the first line); what the unpickler stumbled on ("Unsupported operand 249").
        said = [line.strip() for line in str(exc).splitlines() if line.strip().startswith("Unsupported")]
        raise Unreadable(
            f"it is truncated or corrupt (UnpicklingError: {(said or ['not a pickle'])[0][:200]})"
        ) from None
    except (RuntimeError, EOFError, AttributeError, ValueError, ImportError, IndexError, KeyError, OSError) as exc:
        raise Unreadable(_corrupt(exc)) from None
    if not isinstance(data, dict) or "slurmgen" not in data or "state" not in data:
        raise Unreadable("it is not a slurmgen resume state")
    if not isinstance(data["slurmgen"], dict):
        raise Unreadable("its slurmgen record is not a mapping")
    return data


def _corrupt(exc: BaseException) -> str:
    if isinstance(exc, IsADirectoryError):
        return "it is a directory, not a resume state file"
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"it is truncated or corrupt ({type(exc).__name__}: {first})"
