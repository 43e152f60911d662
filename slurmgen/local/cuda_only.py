"""Programs written for CUDA only, on a local run without GPUs.

A local run without enough GPUs runs the job on CPU with gloo (slurmgen.local.setup.adapt) and exports the backend
it chose (SLURMGEN_BACKEND). A program that ignores it and hard-codes `init_process_group("nccl")`, `cuda:N` or
`torch.cuda.set_device` (pytorch/examples' distributed/ddp-tutorial-series/multinode.py, say) cannot run there. It
is said before the job starts, naming the line and the change that lets it run on CPU; the failure itself is not
restarted (the interruption policy's restart rule, slurmgen/interruption/allocation.py NO_GPU_ERRORS).
"""

from __future__ import annotations

import re
from pathlib import Path

from slurmgen.spec.model import JobSpec
from slurmgen.spec.where import command_script

# What only runs with CUDA: the nccl backend, a CUDA device by number, moving a module to the GPU, DDP's device_ids.
_CUDA_ONLY = re.compile(r"""["']nccl["']|torch\.cuda\.set_device\(|["']cuda:|\.cuda\(|device_ids\s*=""")
# A program that chooses at run time (the recipe below, or its own check) may run on CPU: nothing is said.
_CHOOSES = re.compile(r"SLURMGEN_BACKEND|cuda\.is_available\(|get_backend\(")
MAX_READ = 1 << 20
RECIPE = (
    'backend = os.environ.get("SLURMGEN_BACKEND", "nccl"); device = torch.device(f"cuda:{local_rank}" if '
    'backend == "nccl" else "cpu"); move the model, every batch and torch.load (map_location) to device, not to '
    "local_rank (an int is a CUDA device); call torch.cuda.set_device and pass device_ids only with nccl"
)


def cuda_only_line(text: str) -> tuple[int, str] | None:
    """The first line (number, text) that needs CUDA, in a program that does not choose its device at run time."""
    if _CHOOSES.search(text):
        return None
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if _CUDA_ONLY.search(code):
            return number, line.strip()
    return None


def cuda_only_note(spec: JobSpec, workdir: Path) -> str | None:
    """The line a CPU run says first when its program is written for CUDA only; None when it is not (or unread)."""
    script = command_script(spec.command)
    if script is None or not script.endswith(".py"):
        return None
    path = Path(script) if Path(script).is_absolute() else workdir / script
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            found = cuda_only_line(handle.read(MAX_READ))
    except OSError:
        return None
    if found is None:
        return None
    number, line = found
    return (
        f"{script} cannot run here as written: line {number} needs CUDA ({line}), and this run is on CPU with "
        f"gloo (no GPU here); it will fail there and is not restarted. To rehearse it on CPU: {RECIPE}"
    )
