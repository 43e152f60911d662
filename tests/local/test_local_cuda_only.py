"""A program written for CUDA only (pytorch/examples' ddp-tutorial-series multinode.py itself, vendored unmodified:
nccl, cuda:LOCAL_RANK, torchrun's variables, its own snapshot.pt) on a local run without GPUs: slurmgen's first
line says that it cannot run here, why, and the change that lets it run on CPU; its failure is not restarted."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from runtime.runtime_helpers import without_steering

from local.ddp_tutorial import PROGRAM, place
from slurmgen import interruption, run_history
from slurmgen.batch.task_failure import program_frame
from slurmgen.interruption.allocation import CUDA_RECIPE, Failure, RestartFacts
from slurmgen.local.cuda_only import cuda_only_line

PY = sys.executable


@pytest.mark.slow
@pytest.mark.torch
def test_a_cuda_only_program_is_said_first_and_its_failure_is_not_restarted(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the local run uses it, and the program runs as written")
    place(tmp_path)
    line = PROGRAM.read_text().splitlines().index('    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))') + 1
    port = 20000 + zlib.crc32(str(tmp_path).encode()) % 9000
    (tmp_path / "job.yaml").write_text(
        f"name: ddp\ncommand: [{PY}, multinode.py, '4', '1']\ntime: '00:10:00'\nnodes: 1\ngpus_per_node: 2\n"
        f"launcher: torchrun\npython: {PY}\ndistributed: {{port: {port}}}\npreemption: {{handler: requeue}}\n"
        f"recovery: {{max_restarts: 2}}\n"
    )
    done = subprocess.run([PY, "-m", "slurmgen", "run", "job.yaml"], cwd=tmp_path, env=without_steering(),
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    first = done.stderr.splitlines()[0]
    assert first == (
        f"slurmgen: local-1: multinode.py cannot run here as written: line {line} needs CUDA "
        '(torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))), and this run is on CPU with gloo (no GPU here); it '
        "will fail there and is not restarted. To rehearse it on CPU: backend = "
        'os.environ.get("SLURMGEN_BACKEND", "nccl"); device = torch.device(f"cuda:{local_rank}" if backend == "nccl" '
        'else "cpu"); move the model, every batch and torch.load (map_location) to device, not to local_rank (an '
        "int is a CUDA device); call torch.cuda.set_device and pass device_ids only with nccl"
    ), done.stderr
    assert done.returncode != 0, done.stderr
    assert "FAILED, exit code 1, 1 run in" in done.stderr, done.stderr
    batch = (tmp_path / "logs" / "ddp-1.log").read_text()
    assert f"failed for want of a GPU at multinode.py:{line} (" in batch, batch  # the program's line, not torch's
    assert "not restarted, it would fail the same way" in batch and CUDA_RECIPE in batch, batch
    assert "restarting the step" not in batch, batch
    events = run_history.read(str(tmp_path / "logs" / "ddp-1"))
    assert [e for e in events if e["event"] == run_history.RESTART] == []


@pytest.mark.slow
@pytest.mark.torch
def test_the_recipe_lets_the_cuda_only_program_run_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    place(tmp_path, recipe=True)
    port = 20000 + zlib.crc32(str(tmp_path).encode()) % 9000
    (tmp_path / "job.yaml").write_text(
        f"name: ddp\ncommand: [{PY}, multinode.py, '4', '1']\ntime: '00:10:00'\nnodes: 2\ngpus_per_node: 1\n"
        f"launcher: torchrun\npython: {PY}\ndistributed: {{port: {port}}}\npreemption: {{handler: requeue}}\n"
    )
    done = subprocess.run([PY, "-m", "slurmgen", "run", "job.yaml"], cwd=tmp_path, env=without_steering(),
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "cannot run here" not in done.stderr and "COMPLETED, exit code 0, 1 run" in done.stderr, done.stderr
    assert (
        "Epoch 3 | Training snapshot saved at snapshot.pt" in (tmp_path / "logs" / "ddp-1" / "rank-0.log").read_text()
    )


def test_which_programs_are_written_for_cuda_only() -> None:
    cases = {
        'init_process_group(backend="nccl")\n': (1, 'init_process_group(backend="nccl")'),
        "x = 1\nmodel.to(f'cuda:{rank}')\n": (2, "model.to(f'cuda:{rank}')"),
        "DDP(model, device_ids=[local_rank])\n": (1, "DDP(model, device_ids=[local_rank])"),
        "model.cuda()\n": (1, "model.cuda()"),
        "# init_process_group('nccl') in the cluster version\ninit_process_group('gloo')\n": None,
        'backend = os.environ.get("SLURMGEN_BACKEND", "nccl")\ntorch.cuda.set_device(r)\n': None,  # the recipe
        "dev = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n": None,  # chooses at run time
        "import torch\n": None,
    }
    for text, expected in cases.items():
        assert cuda_only_line(text) == expected, text


def test_the_programs_own_frame_is_the_innermost_outside_torch_and_the_standard_library() -> None:
    """A torch traceback of a CUDA-only program, as a rank's log ends (torch's `[rank0]: ` prefix on some lines):
    the frame named is the program's own innermost, not torch's nor the standard library's."""
    log = [
        "Traceback (most recent call last):",
        '  File "/work/job/old.py", line 3, in <module>',  # an earlier traceback: not the last frame of the program
        "During handling of the above exception, another exception occurred:",
        '[rank0]:   File "/work/job/train.py", line 90, in <module>',
        "[rank0]:     main()",
        '[rank0]:   File "/work/job/train.py", line 81, in main',
        '[rank0]:   File "/work/job/trainer.py", line 33, in __init__',
        "[rank0]:     self.model = DDP(self.model, device_ids=[self.local_rank])",
        '[rank0]:   File "/work/.venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 738, in '
        "__init__",
        '[rank0]:   File "/usr/lib/python3.11/contextlib.py", line 81, in inner',
        '[rank0]:   File "<frozen importlib._bootstrap>", line 1176, in _find_and_load',
        "[rank0]: RuntimeError: No CUDA GPUs are available",
    ]
    assert program_frame(log, "/work/job") == "trainer.py:33"
    assert program_frame(log, "/elsewhere") == "/work/job/trainer.py:33"
    assert program_frame(["RuntimeError: No CUDA GPUs are available"], "/work/job") is None
    facts = RestartFacts(1, (), False, 0, 2, Failure("rank 0", log[-1], "", where="trainer.py:33"), None, no_gpu=True)
    line = interruption.decide(facts).line
    assert line is not None and line.startswith("rank 0 failed for want of a GPU at trainer.py:33 (")
    assert CUDA_RECIPE in line


def failure(error: str) -> Failure:
    return Failure("rank 0 on 127.0.0.1 (exit 1)", error, "")


def test_a_failure_for_want_of_a_gpu_is_not_restarted_where_there_is_none() -> None:
    """The restart rule (interruption.decide of RestartFacts): on a run without a GPU, torch's CUDA errors are not
    restarted; any other crash is, and so is a CUDA error where there are GPUs (a device may come back)."""
    errors = {
        "RuntimeError: Distributed package doesn't have NCCL built in": False,
        "AssertionError: Torch not compiled with CUDA enabled": False,
        "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'": False,
        "RuntimeError: No CUDA GPUs are available": False,
        "RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!": False,
        "ValueError: bad batch": True,
    }
    for error, restarted in errors.items():
        for no_gpu in (True, False):
            facts = RestartFacts(1, (), False, 0, 2, failure(error), None, no_gpu=no_gpu)
            plan = interruption.decide(facts)
            assert plan.restart == (restarted or not no_gpu), (error, no_gpu)
            if not plan.restart:
                assert plan.line is not None and "failed for want of a GPU" in plan.line
