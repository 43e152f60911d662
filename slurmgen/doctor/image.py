"""`slurmgen doctor SPEC` for a spec with a container: does the image exist on the cluster, and does its Python
import torch? One short step on one node of the spec's partition runs the image's interpreter the way the job's
tasks will (`apptainer exec IMAGE PYTHON -c ...`, or pyxis' `srun --container-image`), and prints what it found.

Why on the cluster: the image path is the nodes' (a .sif on a shared file system, a sandbox directory), a docker://
reference is pulled by the nodes, and the runtime exists only there; checking on the login node proves nothing.
The argv and the verdict are pure (tested as tables); `check_image` runs the step through an injected runner.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from slurmgen.slurm.client import Runner, run_command
from slurmgen.spec.model import JobSpec

PROBE_TIMEOUT = 600.0  # s: a docker:// image is pulled and converted on first use
# What the image's interpreter prints: its version, then torch's or why torch does not import.
PROBE = (
    "import sys\n"
    "print('python', sys.version.split()[0], flush=True)\n"
    "try:\n"
    "    import torch\n"
    "    print('torch', torch.__version__)\n"
    "except Exception as exc:\n"
    "    print('no-torch', type(exc).__name__, exc)\n"
)


@dataclass(frozen=True)
class ImageCheck:
    ok: bool
    line: str  # one line for the report: what was found, or what failed and the fix


def probe_argv(spec: JobSpec) -> list[str] | None:
    """The step that runs the image's Python on one node; None without a container, or for enroot (its images are
    started by name after `enroot create`, which a check should not leave behind)."""
    c = spec.container
    if c is None or c.runtime == "enroot":
        return None
    python = c.python or spec.python
    words = ["srun", "--nodes=1", "--ntasks=1", "--time=10"]
    if spec.partition:
        words.append(f"--partition={spec.partition}")
    if spec.account:
        words.append(f"--account={spec.account}")
    if c.runtime == "pyxis":
        return [*words, f"--container-image={c.image}", python, "-c", PROBE]
    from slurmgen.script.container_apptainer import command_name, gpu_flags

    return [*words, command_name(spec), "exec", *gpu_flags(spec), c.image, python, "-c", PROBE]


def verdict(spec: JobSpec, returncode: int, stdout: str, stderr: str) -> ImageCheck:
    """What the probe's output says about the image."""
    c = spec.container
    assert c is not None
    python = c.python or spec.python
    found = dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)
    if "python" not in found:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        # The runtime's own reason (apptainer's FATAL/ERROR line) says more than srun's closing "Exited with ...".
        said = next(
            (x for x in lines if x.startswith(("FATAL", "ERROR"))), lines[-1] if lines else f"exit {returncode}"
        )
        if returncode == 127 or "not found" in said or "no such file" in said.lower():
            fix = (f"check that {c.image} exists on the nodes and has {python} "
                   "(spec fields container.image, container.python)")  # fmt: skip
        else:
            fix = f"run the same step by hand: {c.runtime} on the nodes could not start the image"
        return ImageCheck(False, f"{c.image}: could not run {python} in it ({said}); fix: {fix}")
    if "torch" in found:
        return ImageCheck(True, f"{c.image}: python {found['python']}, torch {found['torch']}")
    why = found.get("no-torch", "no output from the import")
    return ImageCheck(
        False,
        f"{c.image}: python {found['python']}, but torch does not import ({why}); fix: install torch in the image, "
        "or point container.python at an interpreter that has it",
    )


def check_image(spec: JobSpec, run: Runner = run_command, env: Mapping[str, str] | None = None) -> ImageCheck | None:
    """Run the probe step on the cluster; None when the spec has nothing to check."""
    argv = probe_argv(spec)
    if argv is None:
        return None
    try:
        done = run(argv, env, PROBE_TIMEOUT)
    except FileNotFoundError:
        return ImageCheck(False, "srun: command not found; fix: run doctor where Slurm's client commands are")
    except subprocess.TimeoutExpired:
        return ImageCheck(
            False,
            f"{spec.container.image if spec.container else ''}: no answer within "
            f"{PROBE_TIMEOUT:g} s (a pending step, or a slow pull); fix: try again when a node is free",
        )
    except OSError as exc:
        return ImageCheck(False, f"srun could not run: {exc}")
    return verdict(spec, done.returncode, done.stdout, done.stderr)
