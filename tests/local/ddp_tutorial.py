"""pytorch/examples' distributed/ddp-tutorial-series/multinode.py (vendored unmodified in
tests/data/pytorch-examples/ddp-tutorial-series, its README names source, commit and licence), as a test puts it in a
job's directory: as written, or with the edits of docs/local-runs.md "Programs written for CUDA only" applied to its
text, each the smallest the recipe describes, each failing loudly when the vendored text no longer has it."""

from __future__ import annotations

import shutil
from pathlib import Path

UPSTREAM = Path(__file__).resolve().parents[1] / "data" / "pytorch-examples" / "ddp-tutorial-series"
PROGRAM = UPSTREAM / "multinode.py"

# The backend slurmgen chose (SLURMGEN_BACKEND), and the device from it: torch.cuda.set_device only with nccl.
CUDA_SETUP = """def ddp_setup():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group(backend="nccl")"""
EITHER_SETUP = """BACKEND = os.environ.get("SLURMGEN_BACKEND", "nccl")
DEVICE = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if BACKEND == "nccl" else "cpu")


def ddp_setup():
    if BACKEND == "nccl":
        torch.cuda.set_device(DEVICE)
    init_process_group(backend=BACKEND)"""
# In order: each old text must be found in what the edits before it left.
RECIPE_EDITS = (
    (CUDA_SETUP, EITHER_SETUP),
    ("model.to(self.local_rank)", "model.to(DEVICE)"),  # an int is a CUDA device's index
    ('loc = f"cuda:{self.local_rank}"', "loc = DEVICE"),  # torch.load's map_location
    ("device_ids=[self.local_rank]", 'device_ids=[self.local_rank] if BACKEND == "nccl" else None'),
    ("source.to(self.local_rank)", "source.to(DEVICE)"),  # every tensor moved to the device, not only the model
    ("targets.to(self.local_rank)", "targets.to(DEVICE)"),
)


def with_recipe(text: str) -> str:
    for old, new in RECIPE_EDITS:
        if text.count(old) != 1:
            raise AssertionError(f"{PROGRAM}: the recipe's edit expects {old!r} once, found {text.count(old)}")
        text = text.replace(old, new)
    return text


def place(where: Path, recipe: bool = False) -> Path:
    """multinode.py and the datautils.py it imports, in ``where``; with ``recipe``, multinode.py edited by it."""
    shutil.copy(UPSTREAM / "datautils.py", where / "datautils.py")
    program = where / "multinode.py"
    program.write_text(with_recipe(PROGRAM.read_text()) if recipe else PROGRAM.read_text())
    return program
